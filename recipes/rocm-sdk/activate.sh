# rocm-sdk: point ROCm-aware tools at this environment's ROCm: the expanded devel tree in site-packages, the
# root `rocm-sdk path --root` prints. Only plain exports, so activation stays instant; previous values are kept
# for deactivate.sh.
export _ROCM_SDK_OLD_ROCM_PATH="${ROCM_PATH-}"
export _ROCM_SDK_OLD_HIP_PATH="${HIP_PATH-}"
export _ROCM_SDK_OLD_HIP_DEVICE_LIB_PATH="${HIP_DEVICE_LIB_PATH-}"
export ROCM_PATH="$CONDA_PREFIX/@SITE_PACKAGES@/_rocm_sdk_devel"
export HIP_PATH="$ROCM_PATH"
# clang stops searching for device libraries once ROCM_PATH is set, so name them explicitly
export HIP_DEVICE_LIB_PATH="$ROCM_PATH/lib/llvm/amdgcn/bitcode"
# hipcc, amdclang, rocm-sdk, ... are console scripts in $CONDA_PREFIX/bin, already on PATH.
# ROCm's clang on this environment's conda GCC and sysroot, where it holds them (aiter's `gxx` run requirement
# brings both): aiter compiles its kernels with hipcc on first use, torch's cpp_extension builds with it too. The
# same flags builds get (recipes/_shared/hip-toolchain.sh); rocm_clang_toolchain_flags comes from
# _shared/conda-gcc-flags.sh, which build.sh puts at the top of this script. Without a conda GCC: nothing added.
export _ROCM_SDK_OLD_HIPCC_COMPILE_FLAGS_APPEND="${HIPCC_COMPILE_FLAGS_APPEND-}"
export _ROCM_SDK_OLD_HIPCC_LINK_FLAGS_APPEND="${HIPCC_LINK_FLAGS_APPEND-}"
if _rocm_sdk_flags="$(rocm_clang_toolchain_flags "$CONDA_PREFIX" \
        "$CONDA_PREFIX/${CONDA_TOOLCHAIN_HOST:-x86_64-conda-linux-gnu}/sysroot")"; then
    export HIPCC_COMPILE_FLAGS_APPEND="${HIPCC_COMPILE_FLAGS_APPEND:+$HIPCC_COMPILE_FLAGS_APPEND }$_rocm_sdk_flags"
    export HIPCC_LINK_FLAGS_APPEND="${HIPCC_LINK_FLAGS_APPEND:+$HIPCC_LINK_FLAGS_APPEND }$_rocm_sdk_flags"
fi
unset _rocm_sdk_flags
unset -f rocm_clang_toolchain_flags

# vLLM's ROCm image (docker/Dockerfile.rocm_base at v0.33.0) sets runtime fixes for TheRock's SDK; each is applied
# here or declined, with why (docs/recipe-review.md, check 10). ROCM_PATH/HIP_PATH/HIP_DEVICE_LIB_PATH/PATH (:46-54)
# have their equivalents above; its LD_LIBRARY_PATH (:53) is declined: our binaries reach the SDK by RPATH and torch
# by rocm_sdk's preload, and a library path would let the devel tree's second copies win.
# - Applied: ROCPROFILER_QUEUE_INTERPOSITION=0 (:380-382: "torch 2.12 implicitly attaches rocprofiler-sdk; its queue
#   interposition hangs at HSA teardown"). Our torch loads the same SDK's rocprofiler-sdk, so a process can hang at
#   exit the same way; only rocprofiler-sdk reads it, and it costs nothing unless one profiles with queue
#   interposition: a value the user set is kept (set it to 1 to profile).
# - Applied: HSA_NO_SCRATCH_RECLAIM=1 (:56-57, "Required for RCCL"): ROCr keeps a queue's scratch memory instead of
#   reclaiming it, the setting vLLM's multi-GPU (RCCL) runs are tested with; a value the user set is kept.
# - Declined: rocm_sdk's preload with rtld_global=False (:132-134, a sed over AMD's rocm_sdk/__init__.py). vLLM
#   states no failure it fixes; we install AMD's files as shipped (checksum-verified), and torch's _rocm_init preloads
#   with rocm_sdk's default, as AMD tests its torch wheels. Revisit with a failure that shows why.
# - Declined: the librocm_smi64.so.7 link into ROCM_PATH/lib (:135-138). It serves binaries linked against a system
#   ROCm 7 (SONAME librocm_smi64.so.7); every package of this stack links the SDK's own librocm_smi64.so.1, and the
#   link would write into AMD's tree.
export _ROCM_SDK_OLD_ROCPROFILER_QUEUE_INTERPOSITION="${ROCPROFILER_QUEUE_INTERPOSITION-}"
export ROCPROFILER_QUEUE_INTERPOSITION="${ROCPROFILER_QUEUE_INTERPOSITION:-0}"
export _ROCM_SDK_OLD_HSA_NO_SCRATCH_RECLAIM="${HSA_NO_SCRATCH_RECLAIM-}"
export HSA_NO_SCRATCH_RECLAIM="${HSA_NO_SCRATCH_RECLAIM:-1}"
