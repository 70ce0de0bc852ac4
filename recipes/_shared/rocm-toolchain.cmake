# Read by every CMake configure in a build that sourced rocm-env.sh: hip-toolchain.sh exports its path as
# CMAKE_TOOLCHAIN_FILE, which CMake >= 3.21 takes from the environment (a recipe's own -DCMAKE_TOOLCHAIN_FILE would
# replace it). CMake also reads it again for each try_compile. Why each part: hip-toolchain.sh.
# Reads: ROCM_PATH (the SDK root), ROCM_CLANG_TOOLCHAIN_FLAGS (clang's GCC install and sysroot).

# Our HIP first: hip_DIR (and hip-lang_DIR, amd_comgr_DIR, AMDDeviceLibs_DIR, ... for every package folder in the
# SDK's lib/cmake) is the SDK's, as `-Dhip_DIR=` on each command line would make it. find_package(<name>) consults
# <name>_DIR before any search path, so upstream's
# `list(APPEND CMAKE_PREFIX_PATH /opt/rocm)` (aotriton 0.13b, CK) cannot reach a system ROCm for any package the
# SDK ships; the SDK also leads the CMAKE_PREFIX_PATH variable for whatever its packages find in turn.
file(GLOB _rocm_sdk_package_dirs LIST_DIRECTORIES true "$ENV{ROCM_PATH}/lib/cmake/*")
foreach(_rocm_sdk_package_dir IN LISTS _rocm_sdk_package_dirs)
  get_filename_component(_rocm_sdk_package "${_rocm_sdk_package_dir}" NAME)
  if(EXISTS "${_rocm_sdk_package_dir}/${_rocm_sdk_package}-config.cmake"
     OR EXISTS "${_rocm_sdk_package_dir}/${_rocm_sdk_package}Config.cmake")
    set(${_rocm_sdk_package}_DIR "${_rocm_sdk_package_dir}" CACHE PATH "${_rocm_sdk_package}: the ROCm SDK's (rocm-toolchain.cmake)")
  endif()
endforeach()
if(NOT "$ENV{ROCM_PATH}" IN_LIST CMAKE_PREFIX_PATH)
  list(PREPEND CMAKE_PREFIX_PATH "$ENV{ROCM_PATH}")
endif()

# ROCm's clang on conda's GCC and sysroot: for CMake's HIP language, and for C/C++ where a recipe makes ROCm's
# clang the C/C++ compiler (CK). conda's gcc, the C/C++ compiler elsewhere, has its sysroot already.
set(CMAKE_HIP_FLAGS_INIT "$ENV{ROCM_CLANG_TOOLCHAIN_FLAGS}")
get_filename_component(_rocm_clang "$ENV{ROCM_PATH}/lib/llvm/bin/clang" REALPATH)
get_filename_component(_rocm_clang_dir "${_rocm_clang}" DIRECTORY)
foreach(_rocm_lang C CXX)
  if(CMAKE_${_rocm_lang}_COMPILER)
    get_filename_component(_rocm_compiler "${CMAKE_${_rocm_lang}_COMPILER}" REALPATH)
    get_filename_component(_rocm_compiler_dir "${_rocm_compiler}" DIRECTORY)
    if(_rocm_compiler_dir STREQUAL _rocm_clang_dir)
      set(CMAKE_${_rocm_lang}_FLAGS_INIT "$ENV{ROCM_CLANG_TOOLCHAIN_FLAGS}")
    endif()
  endif()
endforeach()
