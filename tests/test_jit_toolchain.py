"""The toolchain a user's environment hands hipcc at run time, where aiter's JIT compiles kernels in the user's process
(aiter/jit/core.py: hipcc for the HIP sources), checked with a real compiler: Debian's ROCm 5.2 hipcc and clang 15
behind the stand-ins tests/hip-build lays out as TheRock's SDK and conda-forge's gxx and sysroot are, and the
activation script recipes/rocm-sdk's build writes. Also the link flags' reason: a clang that defaults to compiler-rt
(TheRock's) with LLVM's per-target runtime layout cannot link for the conda triple without them."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from test_hip_build import DEBIAN_TOOLS, INSTALL, missing_tools
from test_recipe_scripts import install_rocm_sdk

REPO = Path(__file__).resolve().parent.parent
STAND_INS = REPO / "tests/hip-build/recipes"
SITE = "lib/python3.12/site-packages"
CLANG = DEBIAN_TOOLS["clang 15"]


@pytest.fixture(scope="module")
def tools():
    missing = [tool for tool in missing_tools() if tool != "patchelf"]  # nothing is relinked here
    if missing:
        reason = f"Debian's ROCm 5.2 toolchain is not installed (missing: {', '.join(missing)}); run: {INSTALL}"
        (pytest.fail if os.environ.get("CI") == "true" else pytest.skip)(reason)


def conda_env(root: Path, stand_ins: tuple[str, ...] = ("conda-gcc-standin", "rocm-sdk")) -> Path:
    """An environment holding conda's GCC with libstdc++ headers and sysroot (gxx, sysroot_linux-64) and the SDK's
    compiler, each laid out as its conda package lays it out (the tests/hip-build stand-ins' own build scripts)."""
    env = root / "env"
    for stand_in in stand_ins:
        subprocess.run(["bash", str(STAND_INS / stand_in / "build.sh")], env={"PATH": os.environ["PATH"], "PREFIX": str(env)},
                       check=True, capture_output=True)
    return env


@pytest.fixture(scope="module")
def sdk_activation(tmp_path_factory) -> str:
    """rocm-sdk's activation script, as recipes/rocm-sdk's build writes it."""
    prefix = install_rocm_sdk("gfx90a", tmp_path_factory.mktemp("sdk"))
    return "".join(path.read_text() for path in sorted((prefix / "etc/conda/activate.d").glob("*.sh")))


def in_activated(env: Path, activation: str, command: str, cwd: Path) -> subprocess.CompletedProcess:
    (env / "etc/conda/activate.d").mkdir(parents=True, exist_ok=True)
    (env / "etc/conda/activate.d/rocm-sdk.sh").write_text(activation)
    # Debian's hipcc.pl looks for clang in $ROCM_PATH/llvm/bin; TheRock's hipcc finds its own (lib/llvm/bin)
    script = (f'export CONDA_PREFIX="{env}"; . "{env}/etc/conda/activate.d/rocm-sdk.sh"; '
              f'export HIP_CLANG_PATH="$ROCM_PATH/lib/llvm/bin"; {command}')
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=cwd,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(cwd)})


def test_a_real_hip_source_compiles_and_links_through_the_activated_environments_hipcc(tools, sdk_activation, tmp_path):
    """aiter's JIT: hipcc compiles each HIP source with -fPIC for the GPU's arch; hipcc links here too (aiter links
    with $CXX, conda's g++). Every header the compiler read is the environment's (its libstdc++, its sysroot, the
    SDK's HIP), and the module holds real gfx90a code."""
    env, activation = conda_env(tmp_path), sdk_activation
    shutil.copy(STAND_INS / "hip-kernel/src/kernel.hip", tmp_path / "kernel.hip")
    hipcc = '"$ROCM_PATH/bin/hipcc"'
    compiled = in_activated(env, activation, "set -e; "
                            f"{hipcc} -x hip --offload-arch=gfx90a -fPIC -O2 -std=c++17 -MD -MF kernel.d -c kernel.hip -o kernel.o; "
                            f"{hipcc} -shared -fPIC kernel.o -o module_probe.so; "
                            'echo "$HIPCC_LINK_FLAGS_APPEND"', tmp_path)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    assert "--rtlib=libgcc" in compiled.stdout and f"--gcc-toolchain={env}" in compiled.stdout
    deps = (tmp_path / "kernel.d").read_text().replace("\\\n", " ").split(":", 1)[1].split()
    read = [Path(os.path.normpath(word)) for word in deps if not word.endswith("kernel.hip")]
    outside = [str(path) for path in read if not path.is_relative_to(env)]
    assert not outside, f"headers from outside the environment: {outside[:10]}"
    assert any("x86_64-conda-linux-gnu/include/c++/" in str(path) for path in read)
    assert any("x86_64-conda-linux-gnu/sysroot/usr/include/" in str(path) for path in read)
    fatbin = tmp_path / "fatbin"
    subprocess.run(["objcopy", "-O", "binary", "--only-section=.hip_fatbin", str(tmp_path / "module_probe.so"), str(fatbin)],
                   check=True)
    listed = subprocess.run([DEBIAN_TOOLS["clang-offload-bundler"], "--list", "--type=o", f"--input={fatbin}"],
                            capture_output=True, text=True, check=True).stdout.split()
    assert "hipv4-amdgcn-amd-amdhsa--gfx90a" in listed


def test_without_libstdcxx_headers_the_activation_hands_hipcc_nothing(tools, sdk_activation, tmp_path):
    """conda-forge's `gcc` alone (C only, as triton requires it): clang would take the conda GCC and find no
    <cmath>; the SDK's activation adds no flags, and hip-toolchain.sh stops a build with one line
    (tests/test_rocm_sdk_split.py)."""
    env, activation = conda_env(tmp_path, ("conda-gcc-standin",)), sdk_activation
    shutil.rmtree(env / "x86_64-conda-linux-gnu/include/c++")
    result = in_activated(env, activation, 'echo "flags=${HIPCC_COMPILE_FLAGS_APPEND-}"', tmp_path)
    assert result.stdout.strip() == "flags=", result.stdout + result.stderr


def test_the_conda_triple_links_where_clang_defaults_to_compiler_rt_in_the_per_target_layout(tools, tmp_path):
    """TheRock's clang defaults to compiler-rt (compiler/CMakeLists.txt:92). With LLVM's per-target runtime layout
    (lib/clang/<v>/lib/<triple>/, here an empty one) no runtime exists for x86_64-conda-linux-gnu; the toolchain
    flags make clang link conda's libgcc instead, as conda-forge's clang does by default."""
    env = conda_env(tmp_path, ("conda-gcc-standin",))
    resource = tmp_path / "resource-dir"
    (resource / "lib/x86_64-conda-linux-gnu").mkdir(parents=True)
    (resource / "include").symlink_to(Path(CLANG).resolve().parent.parent / "lib/clang/15.0.6/include")
    flags = subprocess.run(["sh", "-c", f'. "{REPO}/recipes/_shared/conda-gcc-flags.sh"; '
                                        f'rocm_clang_toolchain_flags "{env}" "{env}/x86_64-conda-linux-gnu/sysroot"'],
                           capture_output=True, text=True, check=True).stdout.split()
    (tmp_path / "main.cpp").write_text("#include <cmath>\nint main() { return static_cast<int>(std::fabs(0.0)); }\n")
    base = [CLANG, "--driver-mode=g++", f"-resource-dir={resource}", "--rtlib=compiler-rt", str(tmp_path / "main.cpp")]
    without = subprocess.run([*base, *[f for f in flags if "rtlib" not in f and "unwindlib" not in f], "-o",
                              str(tmp_path / "without")], capture_output=True, text=True)
    assert without.returncode != 0 and "libclang_rt.builtins" in without.stderr, without.stderr
    linked = subprocess.run([*base, *flags, "-Werror", "-o", str(tmp_path / "linked")], capture_output=True, text=True)
    assert linked.returncode == 0, linked.stderr
    assert subprocess.run([str(tmp_path / "linked")]).returncode == 0
    compile_only = subprocess.run([CLANG, "--driver-mode=g++", f"-resource-dir={resource}", "-c", str(tmp_path / "main.cpp"),
                                   *flags, "-Werror", "-o", str(tmp_path / "main.o")], capture_output=True, text=True)
    assert compile_only.returncode == 0, compile_only.stderr  # no "argument unused during compilation"
