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


# rocm_sdk_core._cli as TheRock's rocm-sdk-core wheel ships it (build_tools/packaging/python/templates/rocm-sdk-core/
# src/rocm_sdk_core/_cli.py), its rules rewritten here, not copied. At our pin 89553ce3 (= TheRock main when read):
# _get_module_path() returns the devel tree when `rocm_sdk_devel` is importable and `_rocm_sdk_devel` already
# expanded, and _exec() execs <tree>/bin/hipcc with the environment as it is. At 1ca1839f, on the unmerged branch
# users/tvukovic-amd/hipcc-rocm-path-windows-ci-fix (not an ancestor of 89553ce3): hipcc always runs from core, and a
# ROCM_PATH or HIP_PATH resolving anywhere but core is dropped for --rocm-path=/--hip-path=<core>.
CORE_CLI_STAND_IN = '''
import importlib.util, os, sys
from pathlib import Path
def _tree(name):
    return Path(importlib.util.find_spec(name).origin).parent
def hipcc():
    core = _tree("_rocm_sdk_core").resolve()
    argv = sys.argv[1:]
    if BEHAVIOUR == "89553ce3":
        # devel installed and expanded (our rocm-sdk-devel ships it expanded; unexpanded, upstream runs `rocm-sdk init`)
        devel = importlib.util.find_spec("rocm_sdk_devel") and importlib.util.find_spec("_rocm_sdk_devel")
        tool = (_tree("_rocm_sdk_devel") if devel else core) / "bin/hipcc"
    else:
        tool = core / "bin/hipcc"
        if any(os.environ.get(v) and Path(os.environ[v]).resolve() != core for v in ("ROCM_PATH", "HIP_PATH")):
            os.environ.pop("ROCM_PATH", None)
            os.environ.pop("HIP_PATH", None)
            argv = [f"--rocm-path={core}", f"--hip-path={core}", *argv]
    os.execv(tool, [str(tool), *argv])
'''


@pytest.fixture(scope="module")
def console_env(tmp_path_factory) -> Path:
    return environment_with_console_scripts(tmp_path_factory.mktemp("console"))


def environment_with_console_scripts(tmp_path: Path) -> Path:
    """conda_env's SDK as rocm-sdk + rocm-sdk-devel install it: core's console script bin/hipcc (written by the
    recipes' own installer), the rocm_sdk_core and rocm_sdk_devel modules, and a devel tree whose include/ holds a
    header core lacks, as TheRock's does (thrust, hipblas, ...: only devel's `dev` artifacts carry them)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("install_wheels", REPO / "recipes/_shared/install_wheels.py")
    install_wheels = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(install_wheels)
    env = conda_env(tmp_path)
    site, python = env / SITE, env / "bin/python3.12"
    devel_include = site / "_rocm_sdk_devel/include"
    devel_include.unlink()
    devel_include.mkdir()
    for entry in (site / "_rocm_sdk_core/include").iterdir():
        (devel_include / entry.name).symlink_to(f"../../_rocm_sdk_core/include/{entry.name}")
    (devel_include / "rocm_stack_devel_only.h").write_text("#define ROCM_STACK_DEVEL_ONLY 1\n")
    for module in ("_rocm_sdk_core", "_rocm_sdk_devel", "rocm_sdk_core", "rocm_sdk_devel"):
        (site / module).mkdir(exist_ok=True)
        (site / module / "__init__.py").write_text("")
    python.parent.mkdir(exist_ok=True)
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{os.sys.executable}" "$@"\n')  # the env's python
    python.chmod(0o755)
    install_wheels.write_console_scripts("[console_scripts]\nhipcc = rocm_sdk_core._cli:hipcc\n", env, "3.12")
    return env


@pytest.mark.parametrize("behaviour", ["89553ce3", "1ca1839f"])
def test_hipcc_on_path_and_aiters_hipcc_compile_against_the_devel_tree(tools, sdk_activation, console_env, tmp_path,
                                                                     behaviour):
    """In an environment with rocm-sdk and rocm-sdk-devel, `hipcc` on PATH is core's console script. At our pin it
    runs the devel tree's hipcc with the activation's ROCM_PATH/HIP_PATH, so a devel-only header is found. aiter's
    JIT and torch's cpp_extension take ROCM_HOME first and call $ROCM_HOME/bin/hipcc, and builds put $ROCM_PATH/bin
    first on PATH (rocm-env.sh): neither passes through the console script, so they keep the devel tree even under
    the unmerged 1ca1839f rules, which hand hipcc core's tree and fail on that header (so this test can fail)."""
    env = console_env
    (env / SITE / "rocm_sdk_core/_cli.py").write_text(f"BEHAVIOUR = {behaviour!r}\n{CORE_CLI_STAND_IN}")
    (tmp_path / "probe.hip").write_text('#include <hip/hip_runtime.h>\n#include <rocm_stack_devel_only.h>\n'
                                        '__global__ void probe(int* x) { x[0] = ROCM_STACK_DEVEL_ONLY; }\n')
    compile_args = "-x hip --offload-arch=gfx90a -fPIC -c probe.hip"
    console = in_activated(env, sdk_activation, f'export PATH="$CONDA_PREFIX/bin:$PATH"; command -v hipcc; '
                           f'HIPCC_VERBOSE=2 hipcc {compile_args} -o console.o', tmp_path)
    assert console.stdout.splitlines()[0] == f"{env}/bin/hipcc"
    hip_path = next(line for line in console.stdout.splitlines() if line.startswith("HIP_PATH="))  # hipcc's own report
    if behaviour == "89553ce3":
        assert hip_path == f"HIP_PATH={env / SITE}/_rocm_sdk_devel", console.stdout
        assert console.returncode == 0, console.stdout + console.stderr
    else:  # core's tree, which lacks the header (Debian's clang 15 stops even earlier, on core's layout)
        assert hip_path == f"HIP_PATH={env / SITE}/_rocm_sdk_core" and console.returncode != 0, console.stdout
    if behaviour == "89553ce3":
        return
    # aiter's JIT never runs the console script, so one compile, under the rules that break it, shows it for both;
    # from a shell that had ROCM_HOME=/opt/rocm, which the activation takes over (deactivation gives it back)
    jit = in_activated(env, sdk_activation, 'export ROCM_HOME=/opt/rocm; . "$CONDA_PREFIX/etc/conda/activate.d/rocm-sdk.sh"; '
                       'test "$ROCM_HOME" = "$ROCM_PATH" && export PATH="$CONDA_PREFIX/bin:$PATH" && '
                       f'"$ROCM_HOME/bin/hipcc" {compile_args} -o jit.o', tmp_path)
    assert jit.returncode == 0, jit.stdout + jit.stderr
