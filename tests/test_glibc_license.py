"""Issue 25, items 1-3: every compiled output links against the stack's sysroot (`stdlib("c")`), every
repackaged binary wheel requires the glibc its manylinux tag promises (or the stack's bound where it promises
none), and every output names an SPDX license and its license files. Checked on every rendered output of
every architecture on both PyTorch paths, and on real packages built here: a repackaged manylinux wheel and a
compiled-like recipe, read back (info/licenses/, index.json) and solved on a machine with an older glibc."""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
import yaml
from packaging.licenses import InvalidLicenseExpression, canonicalize_license_expression
from rattler.exceptions import SolverError
from rattler_build import Stage0Recipe, VariantConfig

from orchestrate import diagnose, glibc
from orchestrate.prebuilt import ORIGIN_PREBUILT_WHEEL, ORIGIN_PYPI_WHEEL, Prebuilt
from orchestrate.pypi_table import Entry, fill_recipe, load_table
from prebuilt_helpers import make_wheel
from stack import detected_virtual_packages, package_info, solve_with
from test_recipes import ARCHS, PATHS, REPO, SHARED_PINS, plan_for

STACK_GLIBC = SHARED_PINS["c_stdlib_version"][0]
# how ${{ compiler('c') }} / ${{ compiler('cxx') }} and ${{ stdlib('c') }} render for linux-64
COMPILERS = {"gcc_linux-64", "gxx_linux-64"}
SYSROOT = f"sysroot_linux-64 {STACK_GLIBC}.*"
GLIBC_SPEC = re.compile(r"^__glibc >=([\d.]+)$")


def _specs(section) -> list[str]:
    return [s for s in section or [] if isinstance(s, str)]


def _glibc_floors(output) -> set[str]:
    run = _specs((output.rendered.get("requirements") or {}).get("run"))
    return {m.group(1) for m in map(GLIBC_SPEC.match, run) if m}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("arch", ARCHS)
def test_every_compiled_output_links_against_the_stacks_sysroot(arch, path):
    compiled = 0
    for step in plan_for(arch, PATHS[path]).steps:
        build = _specs((step.output.rendered.get("requirements") or {}).get("build"))
        if {s.split()[0] for s in build} & COMPILERS:
            compiled += 1
            assert SYSROOT in build, f"{step.output.label}: compilers without ${{{{ stdlib('c') }}}} ({build})"
    assert compiled  # both paths compile something (flash-attn, vllm, ...)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("arch", ARCHS)
def test_every_repackaged_binary_wheel_requires_the_glibc_its_file_promises(arch, path):
    table = load_table(REPO / "variants")
    pypi_files = {e.name: e.file for e in table.entries.values() if not e.noarch}
    repacks = 0
    for step in plan_for(arch, PATHS[path]).steps:
        floors, name = _glibc_floors(step.output), step.output.name
        if step.output.noarch:  # no ELF file (rocm-sdk-licenses: read from AMD's devel wheel): no bound
            expected = set()
        elif step.origin == ORIGIN_PYPI_WHEEL:
            expected = {glibc.wheel_floor(pypi_files[name])} if name in pypi_files else set()
        elif step.origin == ORIGIN_PREBUILT_WHEEL:
            # the lock records AMD's files as linux_x86_64 (no manylinux promise): the stack's bound; pytorch holds
            # none of a wheel's files (it requires pytorch-base and the device packages, which hold them)
            expected = set() if name == "pytorch" else {STACK_GLIBC}
        else:
            continue
        repacks += bool(expected)
        assert floors == expected, f"{step.output.label}: run requires __glibc {floors or 'nothing'}, not {expected}"
    assert repacks >= 4  # the PyPI binary wheels at least; AMD's on the prebuilt path


@pytest.mark.parametrize("filename, floor", [
    ("xgrammar-0.2.8-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", "2.27"),
    ("oss_harmony-0.0.11-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl", "2.17"),
    ("old-1.0-cp312-cp312-manylinux1_x86_64.whl", "2.5"),
    ("torch-2.14.0+rocm10.1.0-cp312-cp312-linux_x86_64.whl", None),  # AMD's: promises nothing
    ("pure-1.0-py3-none-any.whl", None),
    ("rocm-10.1.0.tar.gz", None),
])
def test_a_wheels_glibc_floor_is_its_lowest_manylinux_tag(filename, floor):
    assert glibc.wheel_floor(filename) == floor
    assert glibc.floor_or_bound(filename, SHARED_PINS) == (floor or STACK_GLIBC)


@pytest.mark.parametrize("found, bound, status", [("2.28", "2.28.0", "ok"), ("2.28.0", "2.28", "ok"),
                                                 ("2.9", "2.28", "fail"), ("2.27.9", "2.28", "fail")])
def test_doctor_compares_glibc_versions_as_versions(found, bound, status):
    """A bound written with three parts (2.28.0) is met by a machine that has exactly 2.28."""
    from orchestrate.doctor import glibc_check

    assert glibc_check(found, bound, "variants/shared.yaml c_stdlib_version").status == status


def test_a_locked_manylinux_file_sets_its_packages_floor(tmp_path):
    """Should AMD publish a manylinux-tagged torch, the lock's file name alone moves pytorch-base's bound."""
    shutil.copy(REPO / "variants/prebuilt.yaml", tmp_path)
    index = yaml.safe_load((REPO / "variants/prebuilt.yaml").read_text())["index"]
    name = f"torch-{SHARED_PINS['prebuilt_pytorch_version'][0]}+rocm{SHARED_PINS['rocm_sdk_version'][0]}-cp312-cp312-manylinux_2_35_x86_64.whl"
    (tmp_path / "prebuilt-lock.yaml").write_text(yaml.safe_dump({"index": index, "artifacts": {
        "torch": {"file": name, "url": index + "torch/" + name, "sha256": "a" * 64}}}))
    keys = Prebuilt.load(tmp_path).variant_keys({**SHARED_PINS, "torch_device_family": [""]}, "gfx942")
    assert keys["torch_glibc"] == "2.35" and keys["torch_sha256"] == "a" * 64
    assert keys["triton_glibc"] == STACK_GLIBC  # not locked: the stack's bound


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("arch", ARCHS)
def test_every_output_names_an_spdx_license_and_its_license_files(arch, path):
    for step in plan_for(arch, PATHS[path]).steps:
        about = step.output.rendered.get("about") or {}
        try:
            canonicalize_license_expression(str(about.get("license") or ""))
        except InvalidLicenseExpression:
            pytest.fail(f"{step.output.label}: about.license {about.get('license')!r} is not an SPDX expression")
        assert about.get("license_file"), f"{step.output.label} names no license file"


def test_the_repository_is_bsd_3_clause_and_says_so_in_pyproject():
    assert (REPO / "LICENSE").read_text().startswith("BSD 3-Clause License")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["license"] == "BSD-3-Clause" and project["license-files"] == ["LICENSE"]


# --- real packages ----------------------------------------------------------------------------------

STAND_INS = """
schema_version: 1
outputs:
  # runs the interpreter running the tests: the wheel installer needs only the standard library
  - package: {{name: python, version: "3.12.0"}}
    build:
      noarch: generic
      script:
        - mkdir -p $PREFIX/bin
        - printf '#!/bin/sh\\nexec {python} "$@"\\n' > $PREFIX/bin/python
        - chmod +x $PREFIX/bin/python
  - package: {{name: gcc_linux-64, version: "14.2.0"}}
    build: {{noarch: generic, script: [echo]}}
  # conda-forge's sysroot exports exactly this to what links against it (linux-sysroot-feedstock meta.yaml)
  - package: {{name: sysroot_linux-64, version: "{glibc}"}}
    build: {{noarch: generic, script: [echo]}}
    requirements:
      run_exports:
        strong:
          - __glibc >={glibc},<3.0.a0
"""

COMPILED = """
package: {name: demo-compiled, version: "1.0"}
build:
  number: 0
  script:
    - mkdir -p $PREFIX/lib
    - printf '\\177ELF stub' > $PREFIX/lib/libdemo.so
requirements:
  build:
    - ${{ compiler('c') }}
    - ${{ stdlib('c') }}
about:
  license: BSD-3-Clause
  license_file: LICENSE
"""


def pypi_recipe(recipes: Path, wheel: Path, license_text: str = "") -> Path:
    """The real recipes/pypi, filled (as the orchestrator does) for one local binary wheel; with `license_text`,
    the entry's license_file (recipes/pypi/licenses/<name>/LICENSE.txt) holds it."""
    folder = recipes / wheel.stem
    shutil.copytree(REPO / "recipes/pypi", folder)
    name = wheel.name.split("-")[0].replace("_", "-")
    license_file = f"licenses/{name}/LICENSE.txt" if license_text else ""
    if license_text:
        (folder / license_file).parent.mkdir(parents=True)
        (folder / license_file).write_text(license_text)
    entry = Entry(name, wheel.name.split("-")[0], "1.0", wheel.name, wheel.as_uri(),
                  hashlib.sha256(wheel.read_bytes()).hexdigest(), noarch=False, depends=(), license="MIT",
                  license_file=license_file)
    template = yaml.safe_load((folder / "recipe.yaml").read_text())
    (folder / "recipe.yaml").write_text(yaml.safe_dump(fill_recipe(template, entry), sort_keys=False))
    return folder / "recipe.yaml"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Into one channel: the stand-ins, the real recipes/pypi filled for a manylinux_2_27 binary wheel, and a
    compiled-like recipe, both rendered with the real variants/shared.yaml."""
    tmp = tmp_path_factory.mktemp("glibc")
    out = tmp / "channel"
    (tmp / "stand-ins").mkdir()
    (tmp / "stand-ins/recipe.yaml").write_text(STAND_INS.format(python=sys.executable, glibc=STACK_GLIBC))
    Stage0Recipe.from_file(tmp / "stand-ins/recipe.yaml").run_build(output_dir=out)
    config = VariantConfig.from_file(str(REPO / "variants/shared.yaml"))

    wheel = make_wheel(tmp / "wheels", "demo-bin", "1.0", "cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64",
                       {"demo_bin/__init__.py": "", "demo_bin/_core.so": b"\x7fELF stub"})
    recipes = tmp / "recipes"
    (recipes / "_shared").mkdir(parents=True)
    for script in ("install_wheels.py", "wheel_licenses.py"):  # the installer and its sibling it imports
        shutil.copy(REPO / "recipes/_shared" / script, recipes / "_shared")
    (recipes / "compiled").mkdir()
    (recipes / "compiled/recipe.yaml").write_text(COMPILED)
    shutil.copy(REPO / "LICENSE", recipes / "compiled")
    for recipe in (pypi_recipe(recipes, wheel), recipes / "compiled/recipe.yaml"):
        [variant] = Stage0Recipe.from_file(recipe).render(config)
        variant.run_build(output_dir=out, channels=[out.as_uri()])
    packages = {}
    for name in ("demo-bin", "demo-compiled"):
        [packages[name]] = (out / "linux-64").glob(f"{name}-1.0-*.conda")
    return out, packages, recipes, config


def test_the_repackaged_wheel_carries_its_license_and_requires_its_glibc_floor(built):
    _, packages, *_ = built
    index, licenses = package_info(packages["demo-bin"])
    assert "__glibc >=2.27" in index["depends"]  # the wheel's lowest manylinux tag
    assert licenses == {"wheel-licenses/demo_bin-1.0.dist-info/licenses/LICENSE": b"synthetic license of demo-bin\n"}
    assert index["license"] == "MIT"


def test_the_compiled_package_requires_the_sysroots_glibc(built):
    _, packages, *_ = built
    index, licenses = package_info(packages["demo-compiled"])
    assert f"__glibc >={STACK_GLIBC},<3.0.a0" in index["depends"]  # the sysroot's run_exports
    assert licenses == {"LICENSE": (REPO / "LICENSE").read_bytes()}


def test_an_older_glibc_cannot_install_them_and_the_solve_error_names_glibc(built, monkeypatch):
    out, *_ = built
    monkeypatch.setenv("CONDA_OVERRIDE_GLIBC", "2.17")
    for package, bound in (("demo-bin", "2.27"), ("demo-compiled", STACK_GLIBC)):
        with pytest.raises(SolverError) as refused:
            solve_with(out, [package], detected_virtual_packages())
        assert f"__glibc >={bound}" in str(refused.value), refused.value  # names the glibc it needs
    monkeypatch.setenv("CONDA_OVERRIDE_GLIBC", STACK_GLIBC)
    names = {r.name.normalized for r in solve_with(out, ["demo-bin", "demo-compiled"], detected_virtual_packages())}
    assert {"demo-bin", "demo-compiled"} <= names


def test_a_wheel_without_a_license_file_fails_its_build_in_one_line_saying_so(built, tmp_path):
    out, _, recipes, config = built
    wheel = tmp_path / "bare_bin-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:  # a dist-info with no license file in it
        archive.writestr("bare_bin/__init__.py", "")
        archive.writestr("bare_bin-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: bare-bin\nVersion: 1.0\n")
        archive.writestr("bare_bin-1.0.dist-info/RECORD", "")
    [variant] = Stage0Recipe.from_file(pypi_recipe(recipes, wheel)).render(config)
    with pytest.raises(Exception) as failed:
        variant.run_build(output_dir=tmp_path / "out", channels=[out.as_uri()])
    line = diagnose.explain(str(failed.value), [], "bare-bin")
    assert line.startswith("no license file was found for bare-bin") and "about.license_file" in line, line


def test_a_wheel_without_a_license_file_builds_with_its_table_entrys_license_file(built, tmp_path):
    """A wheel published without its license (model-hosting-container-standards 0.1.16): the table's license_file
    goes into info/licenses/, and the build log says so."""
    out, _, recipes, config = built
    wheel = make_wheel(tmp_path, "unlicensed-bin", "1.0", "cp312-cp312-manylinux_2_28_x86_64",
                       {"unlicensed_bin/__init__.py": ""}, license=False)
    text = "unlicensed-bin 1.0 ships no license file; its METADATA says MIT. The MIT license's standard text:\n"
    [variant] = Stage0Recipe.from_file(pypi_recipe(recipes, wheel, text)).render(config)
    variant.run_build(output_dir=tmp_path / "out", channels=[out.as_uri()])
    [package] = (tmp_path / "out/linux-64").glob("unlicensed-bin-1.0-*.conda")
    _, licenses = package_info(package)
    assert licenses == {"wheel-licenses/unlicensed_bin-1.0.dist-info/LICENSE.txt": text.encode()}


def test_a_table_license_file_is_not_taken_by_a_wheel_that_brings_its_own(tmp_path):
    wheel = make_wheel(tmp_path, "demo-own", "1.0", "py3-none-any", {"demo_own/__init__.py": ""})
    (tmp_path / "recipe/licenses").mkdir(parents=True)
    (tmp_path / "recipe/licenses/LICENSE.txt").write_text("ours\n")
    env = {"PATH": "/usr/bin:/bin", "PREFIX": str(tmp_path / "prefix"), "SRC_DIR": str(tmp_path), "PYTHON_VERSION": "3.12",
           "RECIPE_DIR": str(tmp_path / "recipe"), "LICENSE_FILE": "licenses/LICENSE.txt"}
    done = subprocess.run([sys.executable, str(REPO / "recipes/_shared/install_wheels.py"), str(wheel)], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert [str(p.relative_to(tmp_path)) for p in (tmp_path / "wheel-licenses").rglob("*") if p.is_file()] == [
        "wheel-licenses/demo_own-1.0.dist-info/licenses/LICENSE"]
    assert "brings its own license files: LICENSE_FILE licenses/LICENSE.txt is not used" in done.stdout


def test_a_wheel_without_a_license_takes_only_the_exact_host_wheel_it_pins(tmp_path):
    """install_wheels.py's fallback for AMD's device wheels: a LICENSES_FROM wheel lends its license files only to a
    wheel that requires exactly its name and version; otherwise the package gets none (and its build fails as above)."""
    tag = "cp312-cp312-linux_x86_64"
    hosts = [make_wheel(tmp_path / "hosts", "demo-host", version, tag, {"demo_host/__init__.py": ""}) for version in ("1.0", "2.0")]
    device = make_wheel(tmp_path, "demo-device", "2.0", tag, {"demo_host/.kpack/demo.kpack": b"kpack"},
                        requires=["demo-host == 2.0"], license=False)

    def licenses_with(*lent: Path) -> dict[str, str]:
        src = tmp_path / f"src-{len(lent)}"
        env = {"PATH": "/usr/bin:/bin", "PREFIX": str(src / "prefix"), "SRC_DIR": str(src), "PYTHON_VERSION": "3.12",
               "LICENSES_FROM": ":".join(map(str, lent))}
        done = subprocess.run([sys.executable, str(REPO / "recipes/_shared/install_wheels.py"), str(device)], env=env,
                              capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return {str(p.relative_to(src)): p.read_text() for p in sorted(src.glob("wheel-licenses/**/*")) if p.is_file()}

    assert licenses_with(hosts[0]) == {}  # the host at another version lends nothing
    got = licenses_with(tmp_path / "hosts")  # a folder stands for its wheels
    note = "wheel-licenses/demo_device-2.0.dist-info/LICENSES-FROM-HOST-WHEEL.txt"
    assert set(got) == {"wheel-licenses/demo_host-2.0.dist-info/licenses/LICENSE", note}, got
    assert "demo-host 2.0, which it requires at exactly that version" in got[note]


def test_a_wheel_without_a_license_takes_a_host_packages_license_folder_at_the_version_it_pins(tmp_path):
    """The SDK's device wheels: LICENSES_FROM names $PREFIX/share/licenses/rocm-sdk, which rocm-sdk-licenses
    (requirements.host) installed; its files apply when that package's version is one the wheel pins exactly. A
    folder no host package installed is refused in one line naming the fix."""
    tag = "cp312-cp312-linux_x86_64"
    device = make_wheel(tmp_path, "demo-device", "2.0", tag, {"demo_host/.kpack/demo.kpack": b"kpack"},
                        requires=["demo-host == 2.0"], license=False)

    def build(version: str | None) -> tuple[subprocess.CompletedProcess, dict[str, str]]:
        src = tmp_path / f"src-{version}"
        prefix = src / "prefix"
        (prefix / "share/licenses/demo/hip").mkdir(parents=True)
        (prefix / "share/licenses/demo/hip/LICENSE.md").write_text("license of HIP\n")
        (prefix / "conda-meta").mkdir()
        if version:  # the record rattler-build's host environment keeps for the package
            (prefix / "conda-meta" / f"demo-licenses-{version}-0.json").write_text(json.dumps(
                {"name": "demo-licenses", "version": version, "files": ["share/licenses/demo/hip/LICENSE.md"]}))
        env = {"PATH": "/usr/bin:/bin", "PREFIX": str(prefix), "SRC_DIR": str(src), "PYTHON_VERSION": "3.12",
               "LICENSES_FROM": str(prefix / "share/licenses/demo")}
        done = subprocess.run([sys.executable, str(REPO / "recipes/_shared/install_wheels.py"), str(device)], env=env,
                              capture_output=True, text=True)
        kept = {str(p.relative_to(src)): p.read_text() for p in sorted(src.glob("wheel-licenses/**/*")) if p.is_file()}
        return done, kept

    done, got = build("2.0")
    assert done.returncode == 0, done.stderr
    note = "wheel-licenses/demo_device-2.0.dist-info/LICENSES-FROM-HOST-WHEEL.txt"
    lent = "wheel-licenses/demo-licenses-2.0/hip/LICENSE.md"
    assert set(got) == {lent, note} and got[lent] == "license of HIP\n", got
    assert "the conda package demo-licenses 2.0" in got[note]
    assert "requires demo-host at exactly that version" in got[note]
    done, got = build("1.0")  # another version of the package lends nothing
    assert done.returncode == 0 and got == {}, (done.stderr, got)
    done, got = build(None)
    assert done.returncode == 1 and got == {}
    assert done.stderr.strip().splitlines() == [
        f"install_wheels: {tmp_path}/src-None/prefix/share/licenses/demo (LICENSES_FROM) is neither a wheel nor a "
        "license folder of a package in the host environment: name the wheel, or add the package that installs the folder to "
        "requirements.host"]
