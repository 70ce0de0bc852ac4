# rocm-sdk (rocm[libraries]): what AMD's runtime needs in the user's environment. It needs no ROCM_PATH: AMD's
# torch finds the SDK's libraries through rocm_sdk (_rocm_init). What hipcc and ROCm-aware build tools need
# (ROCM_PATH, HIP_PATH, HIP_DEVICE_LIB_PATH, hipcc's conda GCC flags) is rocm-sdk-devel's activation
# (activate-devel.sh), so an environment without the devel tree sets none of it and reports nothing missing.
# What it does set: the runtime fixes below, each a plain export whose old value deactivate.sh restores.

# vLLM's ROCm image (docker/Dockerfile.rocm_base at v0.33.0) sets runtime fixes for TheRock's SDK; each is applied
# here or declined, with why (docs/recipe-review.md, check 10). ROCM_PATH/ROCM_HOME/HIP_PATH/HIP_DEVICE_LIB_PATH
# (:48-52) are rocm-sdk-devel's activation's (activate-devel.sh). Its HIP_CLANG_PATH and PATH (:51, :54: the devel
# tree's bin/ and lib/llvm/bin/ first) are not set: hipcc takes clang from $ROCM_PATH/lib/llvm/bin itself, and
# $CONDA_PREFIX/bin's hipcc, hipconfig, amdclang are core's console scripts, which at TheRock 89553ce3 run the
# devel tree's tools (rocm_sdk_core/_cli.py _get_module_path; tests/test_jit_toolchain.py). Its LD_LIBRARY_PATH (:53) is declined:
# our binaries reach the SDK by RPATH and torch by rocm_sdk's preload, and a library path would let the devel tree's
# second copies win.
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
