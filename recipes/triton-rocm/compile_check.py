"""Compile one Triton kernel for an AMD GPU on a machine without one, as a user's first kernel would be.

Run by the recipe's test: libtriton (with LLVM's AMDGPU backend and LLD inside) must load, the AMD backend must be
registered, and the kernel must come out as an AMDGPU code object. The target is given explicitly, so the HIP
driver is never opened (triton.compile with a GPUTarget, as aotriton's python/compile.py does for its kernels).
"""
import triton
import triton.language as tl
from triton.backends import backends
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

ARCH = "gfx942"


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def main() -> None:
    assert "amd" in backends, f"triton's AMD backend is not registered (backends: {sorted(backends)})"
    source = ASTSource(fn=add_kernel, signature={"x_ptr": "*fp32", "y_ptr": "*fp32", "out_ptr": "*fp32",
                                                 "n": "i32", "BLOCK": "constexpr"}, constexprs={"BLOCK": 64})
    compiled = triton.compile(source, target=GPUTarget("hip", ARCH, 64))
    assert compiled.kernel[:4] == b"\x7fELF", "the AMD backend gave no ELF code object"
    assert ARCH in compiled.asm["amdgcn"], f"no {ARCH} code in the kernel's assembly"
    print(f"triton {triton.__version__}: compiled add_kernel for {ARCH} ({len(compiled.kernel)} bytes)")


if __name__ == "__main__":
    main()
