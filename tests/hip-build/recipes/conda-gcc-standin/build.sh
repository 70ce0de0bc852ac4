#!/usr/bin/env bash
set -euo pipefail
triple=x86_64-conda-linux-gnu
debian_gcc="$(dirname "$(gcc -print-libgcc-file-name)")"   # /usr/lib/gcc/x86_64-linux-gnu/<major>
version="$(gcc -dumpfullversion)"
major="$(basename "$debian_gcc")"
link_each() {  # link_each <from folder> <into folder>: one symlink per entry
    mkdir -p "$2"
    for entry in "$1"/*; do ln -s "$entry" "$2/"; done
}
link_each "$debian_gcc" "$PREFIX/lib/gcc/$triple/$version"
link_each "/usr/include/c++/$major" "$PREFIX/$triple/include/c++/$version"
ln -s "/usr/include/x86_64-linux-gnu/c++/$major" "$PREFIX/$triple/include/c++/$version/$triple"
# The sysroot holds the C library's and the kernel's headers only (libc6-dev, linux-libc-dev), not all of /usr/include.
sysroot="$PREFIX/$triple/sysroot"
mkdir -p "$sysroot/usr/include"
for entry in $(dpkg -L libc6-dev linux-libc-dev | grep -E '^/usr/include/[^/]+$' | sort -u); do
    ln -s "$entry" "$sysroot/usr/include/"
done
# crt1.o and libc; libc.so names /lib/x86_64-linux-gnu/libc.so.6, which the linker looks up inside the sysroot
mkdir -p "$sysroot/lib" "$sysroot/usr/lib"
ln -s /lib/x86_64-linux-gnu "$sysroot/lib/x86_64-linux-gnu"
ln -s /usr/lib/x86_64-linux-gnu "$sysroot/usr/lib64"
ln -s /usr/lib/x86_64-linux-gnu "$sysroot/usr/lib/x86_64-linux-gnu"
ln -s /lib64 "$sysroot/lib64"
