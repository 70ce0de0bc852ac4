# shellcheck shell=bash
# Build knobs shared by every recipe: job count and compiler cache.
#
# Usage (in a recipe's build script):   source "$RECIPE_DIR/../_shared/build-knobs.sh"
# Reads (declare them in build.script.env; rattler-build's strict env isolation drops the rest):
#   MAX_JOBS           parallel compile jobs; the orchestrator sizes it from cores and memory (default 4).
#   COMPILER_LAUNCHER  "ccache", "sccache" or empty. Must be on PATH (add it to requirements.build).
#   CCACHE_DIR, SCCACHE_DIR  the compiler cache's folder, outside the work folder (the orchestrator sets them), so a
#                      retry after a failure finds the objects the failed build compiled
# Exports:
#   MAX_JOBS, CMAKE_BUILD_PARALLEL_LEVEL   read by setup.py/torch builds and `cmake --build`
#   NINJA_JOBS_FLAG                        "-j$MAX_JOBS", for a direct `ninja $NINJA_JOBS_FLAG` call
#   CMAKE_{C,CXX,HIP}_COMPILER_LAUNCHER    read by CMake >= 3.17 for every project it configures
#   HIP_CLANG_LAUNCHER                     read by hipcc (ROCm >= 7.13) for compiles that bypass CMake
# Memory, not cores, is what runs out: one HIP/LLVM compile or link job can take 4-8 GB.

MAX_JOBS="${MAX_JOBS:-4}"
if ! [[ "$MAX_JOBS" =~ ^[1-9][0-9]*$ ]]; then
    echo "build-knobs.sh: MAX_JOBS must be a positive integer, got '$MAX_JOBS'" >&2
    exit 1
fi
export MAX_JOBS
export CMAKE_BUILD_PARALLEL_LEVEL="$MAX_JOBS"
export NINJA_JOBS_FLAG="-j$MAX_JOBS"

case "${COMPILER_LAUNCHER:-}" in
    "") ;;
    ccache|sccache)
        if ! command -v "$COMPILER_LAUNCHER" >/dev/null 2>&1; then
            echo "build-knobs.sh: COMPILER_LAUNCHER=$COMPILER_LAUNCHER is not on PATH; building without it" >&2
        else
            export CMAKE_C_COMPILER_LAUNCHER="$COMPILER_LAUNCHER"
            export CMAKE_CXX_COMPILER_LAUNCHER="$COMPILER_LAUNCHER"
            export CMAKE_HIP_COMPILER_LAUNCHER="$COMPILER_LAUNCHER"
            export HIP_CLANG_LAUNCHER="$COMPILER_LAUNCHER"
            # an empty folder variable means the tool's default ($HOME/.cache: the work folder, gone after the build)
            if [ -n "${CCACHE_DIR:-}" ]; then export CCACHE_DIR; else unset CCACHE_DIR; fi
            if [ -n "${SCCACHE_DIR:-}" ]; then export SCCACHE_DIR; else unset SCCACHE_DIR; fi
        fi
        ;;
    *)
        echo "build-knobs.sh: COMPILER_LAUNCHER must be ccache, sccache or empty, got '$COMPILER_LAUNCHER'" >&2
        exit 1
        ;;
esac
