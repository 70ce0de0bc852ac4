# shellcheck shell=sh
# clang's flags for the GCC and sysroot that conda-forge's compilers install under a prefix (POSIX sh: sourced by
# hip-toolchain.sh in builds, and part of rocm-sdk's activation script for compiles at run time, such as aiter's JIT).
# Why each flag: hip-toolchain.sh.
#
# rocm_clang_toolchain_flags PREFIX SYSROOT
#   prints `--target=<triple> --gcc-toolchain=PREFIX --sysroot=SYSROOT` and the runtime-library flags below, and
#   returns 0, or prints one line saying what is missing (naming the recipe requirement that brings it) and returns 1.
#
# The runtime libraries: TheRock's clang defaults to compiler-rt and libunwind (compiler/CMakeLists.txt:92,
# CLANG_DEFAULT_RTLIB=compiler-rt), which clang looks up per target triple once LLVM installs its runtimes in the
# per-target layout (lib/clang/<v>/lib/x86_64-conda-linux-gnu/, which no SDK has): every link would then fail.
# --rtlib=libgcc --unwindlib=libgcc are conda-forge clang's own defaults and link against the GCC just named.
# They only matter when clang links; --start-no-unused-arguments keeps a compile-only call from warning about them
# (a -Werror build would stop on "argument unused during compilation"), from clang 14 on.
rocm_clang_toolchain_flags() {
    _rctf_triple="${CONDA_TOOLCHAIN_HOST:-x86_64-conda-linux-gnu}"
    # find, not a glob: zsh stops on a glob that matches nothing
    _rctf_crtbegin="$(find "$1/lib/gcc/$_rctf_triple" -mindepth 2 -maxdepth 2 -name crtbegin.o 2>/dev/null)"
    _rctf_count="$(printf '%s' "$_rctf_crtbegin" | grep -c crtbegin.o || true)"
    if [ "$_rctf_count" -ne 1 ]; then
        echo "no single GCC installation at $1/lib/gcc/$_rctf_triple/<version>/crtbegin.o (found $_rctf_count): conda's GCC comes with \${{ compiler('cxx') }} (gxx at run time)"
        return 1
    fi
    # clang takes libstdc++'s headers from the GCC installation it picked, by that GCC's version; conda-forge's `gcc`
    # (C only) and older gcc_impl builds bring none, and every C++ compile would then stop at `'cmath' file not found`
    _rctf_version="$(basename "$(dirname "$_rctf_crtbegin")")"
    if [ ! -f "$1/$_rctf_triple/include/c++/$_rctf_version/cmath" ]; then
        echo "the GCC $_rctf_version at $1 has no libstdc++ headers ($1/$_rctf_triple/include/c++/$_rctf_version/cmath): they come with \${{ compiler('cxx') }} (gxx, which brings libstdcxx-devel, at run time), not with gcc"
        return 1
    fi
    if [ ! -f "$2/usr/include/stdio.h" ]; then
        echo "no C library headers in the sysroot $2 (usr/include/stdio.h): they come with \${{ stdlib('c') }} (sysroot_linux-64)"
        return 1
    fi
    echo "--target=$_rctf_triple --gcc-toolchain=$1 --sysroot=$2 --start-no-unused-arguments --rtlib=libgcc --unwindlib=libgcc --end-no-unused-arguments"
}
