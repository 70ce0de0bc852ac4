#include <hip/hip_runtime.h>
#include <vector>

__global__ void scale(float* x, float a) { x[threadIdx.x] *= a; }

extern "C" int hip_kernel_scale(float* x, float a) {
    std::vector<float> check(1, a);
    hipLaunchKernelGGL(scale, dim3(1), dim3(64), 0, 0, x, check[0]);
    return static_cast<int>(hipGetLastError());
}
