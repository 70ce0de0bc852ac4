"""The repacks' Requires-Dist check (recipes/_shared/install_wheels.py) against the METADATA real wheels carry
(tests/real_metadata.py reads it from PyPI, cached): markers evaluated for the Python and platform the package is
for, an extra's requirements only where that extra is asked for; rocm-bootstrap, which AMD's splitter makes every
split host wheel require, is a package of its own; triton's packages bring a C compiler."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from orchestrate.pypi import conda_depends, marker_environment
from orchestrate.pypi_table import load_table
from prebuilt_helpers import make_wheel, torch_device_wheels
from real_metadata import ROCM_BOOTSTRAP, TORCHVISION, TRITON, metadata, requires_dist, splitter_lines, with_version

REPO = Path(__file__).resolve().parent.parent
INSTALLER = REPO / "recipes/_shared/install_wheels.py"
PREBUILT = yaml.safe_load((REPO / "recipes/pytorch-prebuilt/recipe.yaml").read_text())


def installer():
    spec = importlib.util.spec_from_file_location("install_wheels_under_test", INSTALLER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def prebuilt_output(name: str) -> dict:
    return next(o for o in PREBUILT["outputs"] if o["package"]["name"] == name)


def install(wheels: Path | list[Path], prefix: Path, python_version: str, satisfied_by: str) -> subprocess.CompletedProcess:
    wheels = wheels if isinstance(wheels, list) else [wheels]
    return subprocess.run([sys.executable, str(INSTALLER), *map(str, wheels)], capture_output=True, text=True,
                          env={"PREFIX": str(prefix), "PYTHON_VERSION": python_version, "SATISFIED_BY": satisfied_by})


def test_real_triton_metadata_passes_the_requirement_check_of_the_triton_repack(tmp_path):
    """PyPI's triton 3.8.0 says `Requires-Dist: importlib-metadata; python_version < "3.10"` (AMD's wheel is built
    from the same setup.py): for Python 3.12 nothing is missing, with exactly the SATISFIED_BY the recipe's triton
    output sets. For Python 3.9 the same line applies, and the build stops naming it."""
    real = metadata(TRITON)
    assert 'importlib-metadata; python_version < "3.10"' in requires_dist(real)  # what makes this test worth having
    amd = with_version(real, "triton", "3.8.0+git669b31ac.rocm10.1.0")
    wheel = make_wheel(tmp_path, "triton", "3.8.0+git669b31ac.rocm10.1.0", "cp312-cp312-linux_x86_64",
                       {"triton/__init__.py": ""}, metadata=amd)
    satisfied_by = prebuilt_output("triton")["build"]["script"]["env"]["SATISFIED_BY"]
    done = install(wheel, tmp_path / "py312", "3.12", satisfied_by)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "py312/lib/python3.12/site-packages/triton/__init__.py").is_file()
    old_python = install(wheel, tmp_path / "py39", "3.9", satisfied_by)
    assert old_python.returncode == 1 and "Traceback" not in old_python.stderr
    assert 'requires importlib-metadata; python_version < "3.10", which no run requirement' in old_python.stderr


def test_an_extras_requirement_counts_only_where_that_extra_is_asked_for():
    """Real torchvision METADATA (its gdown and scipy extras) with the splitter's device extras: none of those is a
    run requirement; asked for, an extra's requirement is one."""
    vision = "0.29.0a0+rocm10.1.0"
    lines = requires_dist(with_version(metadata(TORCHVISION), "torchvision", vision,
                                       add=splitter_lines("amd-torchvision-device", vision, {"gfx942": ["gfx942"]})))
    check = installer().unsatisfied
    provided = {"numpy", "pillow", "pytorch", "rocm-bootstrap"}
    assert check(lines, set(), provided, "3.12") == []
    assert check(lines, set(), provided, "3.12", frozenset({"gdown"})) == ["gdown (>=4.7.3) ; extra == 'gdown'"]
    assert check(lines, set(), provided, "3.12", frozenset({"device-gfx942"})) == [
        f'amd-torchvision-device-gfx942 == {vision}; extra == "device-gfx942"']
    # rocm-bootstrap is not the SDK: the SDK does not satisfy it
    assert check(lines, set(), {"numpy", "pillow", "pytorch", "rocm-sdk"}, "3.12") == ["rocm-bootstrap"]


def test_the_build_and_the_pypi_table_evaluate_markers_for_the_same_place():
    """install_wheels.py (in the build, standard library + packaging) and `pypi add` (the orchestrator) each hold
    the marker values of a Linux x86_64 CPython: they must be the same values."""
    assert installer().marker_environment("3.12") == marker_environment("3.12")


def test_rocm_bootstrap_is_its_own_package_pinned_to_the_real_wheel():
    table = load_table(REPO / "variants")
    entry = table.entries["rocm-bootstrap"]
    assert (entry.pypi, entry.version, entry.file, entry.sha256) == (
        ROCM_BOOTSTRAP.project, ROCM_BOOTSTRAP.version, ROCM_BOOTSTRAP.file, ROCM_BOOTSTRAP.sha256)
    assert entry.license == "MIT" and (REPO / "recipes/pypi" / entry.license_file).is_file()
    real = metadata(ROCM_BOOTSTRAP)
    # its depends are what its own METADATA says (only a `dev` extra's pytest, dropped), as `pypi add` translates it
    requires_python = next(line.split(":", 1)[1].strip() for line in real.splitlines() if line.startswith("Requires-Python:"))
    assert list(entry.depends) == conda_depends(requires_dist(real), requires_python, True, "3.12", table)
    assert "rocm-bootstrap" not in installer().CONDA_NAMES


@pytest.mark.parametrize("arch, family", [("gfx1151", "gfx115x"), ("gfx1201", "gfx12-0")])
def test_the_pytorch_repack_installs_the_family_wheel_the_target_device_wheel_requires(tmp_path, arch, family):
    """rocm_kpack's splitter makes a target's device wheel require the family wheel of its packaging chain at the
    host's exact version (generate_device_metadata, prebuilt_helpers.device_metadata says where), and the family
    wheel requires no rocm-sdk-device-<family>, which AMD does not publish. The target's output installs its own wheel
    and counts the family's package (amd-torch-device-gfx12-0, built once for the family from its wheel) as the
    requirement's provider; without the family's package named the build stops naming the family wheel."""
    version = "2.14.0+rocm10.1.0"
    wheels = torch_device_wheels(tmp_path / "wheels", arch, version, "10.1.0")
    target, family_wheel = wheels[f"amd-torch-device-{arch}"], wheels[f"amd-torch-device-{family}"]
    requirement = f"amd-torch-device-{family} == {version}"
    with zipfile.ZipFile(target) as zf:
        assert requirement in requires_dist(zf.read(f"amd_torch_device_{arch}-{version}.dist-info/METADATA").decode())
    with zipfile.ZipFile(family_wheel) as zf:
        [metadata_file] = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        assert requires_dist(zf.read(metadata_file).decode()) == [f"torch == {version}"]
    # AMD's split, as our packages follow it: the target's device package installs the target wheel and run-requires
    # the family's package, which installs the family wheel (each once, however many GPUs share the family)
    target_env = prebuilt_output("amd-torch-device-${{ gpu_arch }}")["build"]["script"]["env"]["SATISFIED_BY"]
    family_term = '${{ ("amd-torch-device-" ~ torch_device_family) if torch_device_family else "" }}'
    assert family_term in target_env
    satisfied_by = target_env.replace("${{ gpu_arch }}", arch).replace(family_term, f"amd-torch-device-{family}")
    done = install([target], tmp_path / "target", "3.12", satisfied_by)
    assert done.returncode == 0, done.stderr
    family_env = prebuilt_output("amd-torch-device-${{ torch_device_family or \"none\" }}")["build"]["script"]["env"]["SATISFIED_BY"]
    done = install([family_wheel], tmp_path / "family", "3.12", family_env)
    assert done.returncode == 0, done.stderr
    # without the family package among the run requirements, the build stops naming the family wheel
    alone = install([target], tmp_path / "alone", "3.12", satisfied_by.replace(f"amd-torch-device-{family}", ""))
    assert alone.returncode == 1 and "Traceback" not in alone.stderr
    assert f"requires {requirement}, which no run requirement" in alone.stderr


@pytest.mark.parametrize("output", ["pytorch-base", "torchvision"])
def test_the_split_host_wheels_repacks_require_rocm_bootstrap(output):
    recipe = prebuilt_output(output)
    assert "rocm-bootstrap" in recipe["requirements"]["run"]
    assert "rocm-bootstrap" in recipe["build"]["script"]["env"]["SATISFIED_BY"].split()


def test_every_triton_output_brings_a_c_compiler():
    source = yaml.safe_load((REPO / "recipes/triton-rocm/recipe.yaml").read_text())
    assert "gcc" in source["requirements"]["run"]
    assert "gcc" in prebuilt_output("triton")["requirements"]["run"]
