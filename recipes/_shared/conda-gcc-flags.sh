# shellcheck shell=sh
# clang's flags for the GCC and sysroot that conda-forge's compilers install under a prefix (POSIX sh: sourced by
# hip-toolchain.sh in builds, and part of rocm-sdk's activation script for compiles at run time, such as aiter's JIT).
# Why each flag: hip-toolchain.sh.
#
# rocm_clang_toolchain_flags PREFIX SYSROOT
#   prints `--target=<triple> --gcc-toolchain=PREFIX --sysroot=SYSROOT` and returns 0, or prints what is missing
#   (naming the recipe requirement that brings it) and returns 1.
rocm_clang_toolchain_flags() {
    _rctf_triple="${CONDA_TOOLCHAIN_HOST:-x86_64-conda-linux-gnu}"
    # find, not a glob: zsh stops on a glob that matches nothing
    _rctf_count="$(find "$1/lib/gcc/$_rctf_triple" -mindepth 2 -maxdepth 2 -name crtbegin.o 2>/dev/null | wc -l)"
    if [ "$_rctf_count" -ne 1 ]; then
        echo "no single GCC installation at $1/lib/gcc/$_rctf_triple/<version>/crtbegin.o (found $_rctf_count): conda's GCC comes with \${{ compiler('cxx') }} (gxx at run time)"
        return 1
    fi
    if [ ! -f "$2/usr/include/stdio.h" ]; then
        echo "no C library headers in the sysroot $2 (usr/include/stdio.h): they come with \${{ stdlib('c') }} (sysroot_linux-64)"
        return 1
    fi
    echo "--target=$_rctf_triple --gcc-toolchain=$1 --sysroot=$2"
}
