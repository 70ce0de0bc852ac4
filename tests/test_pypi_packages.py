"""PyPI-only dependencies (variants/pypi.yaml + recipes/pypi): `orchestrate pypi add` pins a release from a
loopback PyPI (JSON API + wheel), the one recipe builds it offline with its sha256 checked, the package
installs with py-rattler and imports, a wrong sha256 is refused naming URL/expected/actual, and `pins`
reports a newer release."""
from __future__ import annotations

import hashlib
import io
import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest
import yaml

from orchestrate.architectures import ArchitectureTable, write_variant_files
from orchestrate.cli import main
from stack import install, package_info

REPO = Path(__file__).resolve().parent.parent
ARCH = "gfx1151"
REQUIRES = [
    "typing_extensions>=4.0",
    'pywin32; sys_platform == "win32"',  # not on Linux: dropped
    'pytest; extra == "test"',  # an extra's: dropped
    'Torch>=2.0; platform_system == "Linux" and python_version >= "3.10"',  # mapped to conda-forge's name
]


def make_wheel(version: str, name: str = "demo-pkg", license: bool = True) -> bytes:
    buffer = io.BytesIO()
    module = name.replace("-", "_")
    dist = f"{module}-{version}.dist-info"
    metadata = "Metadata-Version: 2.1\nName: {}\nVersion: {}\nSummary: a demo\nLicense: MIT\n" \
               "Requires-Python: >=3.9\n{}".format(name, version, "".join(f"Requires-Dist: {r}\n" for r in REQUIRES))
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"{module}/__init__.py", f"VERSION = {version!r}\n")
        archive.writestr(f"{dist}/METADATA", metadata)
        if license:  # model-hosting-container-standards 0.1.16 ships none
            archive.writestr(f"{dist}/licenses/LICENSE", f"{name}'s license\n")  # PEP 639's place for it
        archive.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        archive.writestr(f"{dist}/RECORD", "")
    return buffer.getvalue()


@pytest.fixture
def index(tmp_path: Path):
    """A loopback PyPI: /pypi/demo-pkg/json (PyPI's JSON API, relative file links as a mirror serves
    them) and the wheels of releases 1.0 and 1.1."""
    root = tmp_path / "index"
    (root / "files").mkdir(parents=True)
    releases = {}
    for version in ("1.0", "1.1"):
        name = f"demo_pkg-{version}-py3-none-any.whl"
        data = make_wheel(version)
        (root / "files" / name).write_bytes(data)
        releases[version] = [{"filename": name, "url": f"../../files/{name}", "yanked": False,
                              "digests": {"sha256": hashlib.sha256(data).hexdigest()}}]
    (root / "pypi" / "demo-pkg").mkdir(parents=True)
    (root / "pypi" / "demo-pkg" / "json").write_text(json.dumps(
        {"info": {"name": "demo-pkg", "version": "1.1", "requires_dist": REQUIRES}, "releases": releases}))
    bare = "bare_pkg-1.0-py3-none-any.whl"  # a release published without its license file
    (root / "files" / bare).write_bytes(make_wheel("1.0", "bare-pkg", license=False))
    (root / "pypi" / "bare-pkg").mkdir(parents=True)
    (root / "pypi" / "bare-pkg" / "json").write_text(json.dumps({"info": {"name": "bare-pkg", "version": "1.0"}, "releases": {
        "1.0": [{"filename": bare, "url": f"../../files/{bare}", "yanked": False,
                 "digests": {"sha256": hashlib.sha256((root / "files" / bare).read_bytes()).hexdigest()}}]}}))

    # A separate process: py-rattler-build holds the GIL while it downloads, so an in-process server
    # thread would never answer.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "http.server", "--bind", "127.0.0.1", str(port),
                               "--directory", str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 10
    while True:
        try:
            urllib.request.urlopen(f"{base}/pypi/demo-pkg/json", timeout=1).read()
            break
        except OSError:
            if time.monotonic() > deadline:
                server.kill()
                raise
            time.sleep(0.05)
    yield base, releases
    server.kill()
    server.wait()


STAND_INS = """
# Offline stand-ins for conda-forge's packages. `python` runs the interpreter running the tests, with
# the prefix's site-packages on its path, so the recipe's import test works without conda-forge.
schema_version: 1
outputs:
  - package: {name: python, version: "3.12.0"}
    build:
      script:
        - mkdir -p $PREFIX/bin
        - printf '#!/bin/sh\\nhere=$(cd "$(dirname "$0")/.." && pwd)\\nPYTHONPATH="$here/lib/python3.12/site-packages" exec %s "$@"\\n' > $PREFIX/bin/python
        - chmod +x $PREFIX/bin/python
  - package: {name: typing-extensions, version: "4.12.0"}
    build: {noarch: generic, script: [echo]}
  - package: {name: pytorch, version: "2.14.1"}
    build: {noarch: generic, script: [echo]}
"""


@pytest.fixture
def pypi_workspace(tmp_path: Path, monkeypatch) -> Path:
    """A workspace with the real recipes/pypi, the stand-ins above, and an empty variants/pypi.yaml."""
    workspace = tmp_path / "ws"
    (workspace / "recipes" / "stand-ins").mkdir(parents=True)
    shutil.copytree(REPO / "recipes" / "pypi", workspace / "recipes" / "pypi")
    (workspace / "recipes" / "_shared").mkdir()
    for script in ("install_wheels.py", "wheel_licenses.py"):  # the installer and its sibling it imports
        shutil.copy(REPO / "recipes" / "_shared" / script, workspace / "recipes" / "_shared")
    (workspace / "recipes" / "stand-ins" / "recipe.yaml").write_text(STAND_INS.replace("%s", sys.executable))
    variants = workspace / "variants"
    variants.mkdir()
    shutil.copy(REPO / "variants" / "architectures.yaml", variants)
    (variants / "shared.yaml").write_text('python: ["3.12"]\n')
    (variants / "upstreams.yaml").write_text("components: {}\n")
    (variants / "pypi.yaml").write_text("# test table\nnames:\n  torch: pytorch\npackages:\n")
    write_variant_files(ArchitectureTable.load(variants), variants)
    monkeypatch.chdir(workspace)
    monkeypatch.delenv("ORCHESTRATE_ARCH", raising=False)
    return workspace


def run(capsys, *args) -> tuple[int, str]:
    capsys.readouterr()
    code = main([str(a) for a in args])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def entry_of(workspace: Path, name: str = "demo-pkg") -> dict:
    return yaml.safe_load((workspace / "variants" / "pypi.yaml").read_text())["packages"][name]


def test_add_pins_the_file_by_sha256_with_dependencies_from_its_metadata(index, pypi_workspace, capsys):
    url, releases = index
    code, out = run(capsys, "pypi", "add", "demo-pkg==1.0", "--pypi-url", f"{url}/pypi")
    assert code == 0, out
    entry = entry_of(pypi_workspace)
    assert entry["version"] == "1.0" and entry["noarch"] is True
    assert entry["url"] == f"{url}/files/demo_pkg-1.0-py3-none-any.whl"
    assert entry["sha256"] == releases["1.0"][0]["digests"]["sha256"]
    # markers evaluated for Linux / CPython 3.12, the extra's requirement dropped, torch named as conda-forge does
    assert entry["depends"] == ["python >=3.9", "typing-extensions >=4.0", "pytorch >=2.0"]
    assert entry["imports"] == ["demo_pkg"]
    # refreshing to another release rewrites the one entry, keeping the file's header
    assert run(capsys, "pypi", "add", "demo-pkg==1.1", "--pypi-url", f"{url}/pypi")[0] == 0
    text = (pypi_workspace / "variants" / "pypi.yaml").read_text()
    assert text.startswith("# test table") and text.count("demo-pkg:") == 1
    assert entry_of(pypi_workspace)["sha256"] == releases["1.1"][0]["digests"]["sha256"]
    code, out = run(capsys, "pypi", "add", "demo-pkg==9.9", "--pypi-url", f"{url}/pypi")
    assert code == 2 and "PyPI has no demo-pkg 9.9" in out and len(out.strip().splitlines()) == 1


@pytest.mark.parametrize("arguments, said", [
    (["--conda-name", "Demo Pkg"], "argument --conda-name: 'Demo Pkg' is not a conda package name"),
    (["--license-file", "no-such-LICENSE"], "--license-file no-such-LICENSE is not a file"),
], ids=["conda name with a space", "license file not there"])
def test_add_refuses_a_wrong_option_in_one_line_writing_nothing(index, pypi_workspace, capsys, arguments, said):
    """A package name conda refuses was written into the table; a missing license file was named as misnamed."""
    url, _ = index
    table = (pypi_workspace / "variants" / "pypi.yaml").read_text()
    try:
        code, out = run(capsys, "pypi", "add", "demo-pkg==1.0", "--pypi-url", f"{url}/pypi", *arguments)
    except SystemExit as stopped:  # argparse's refusal
        code, out = stopped.code, capsys.readouterr().err
    assert code == 2 and out.count("\n") == 1 and said in out, out
    assert (pypi_workspace / "variants" / "pypi.yaml").read_text() == table


def test_repackaged_wheel_builds_offline_installs_and_imports(index, pypi_workspace, capsys, tmp_path):
    url, _ = index
    assert run(capsys, "pypi", "add", "demo-pkg==1.0", "--pypi-url", f"{url}/pypi")[0] == 0
    code, out = run(capsys, "plan", "--arch", ARCH, "--no-source-channels", "demo-pkg")
    assert code == 0 and "demo-pkg" in out and "pyh" in out, out
    demo_row = next(line for line in out.splitlines() if " demo-pkg " in line)
    assert "PyPI wheel" in demo_row and "source build" not in demo_row, demo_row  # the `from` column
    code, out = run(capsys, "build", "--arch", ARCH, "--no-source-channels", "-q", "demo-pkg")
    assert code == 0, out
    [package] = (pypi_workspace / "channel" / "noarch").glob("demo-pkg-1.0-*.conda")
    index, licenses = package_info(package)
    assert licenses == {"wheel-licenses/demo_pkg-1.0.dist-info/licenses/LICENSE": b"demo-pkg's license\n"}
    assert not [d for d in index["depends"] if d.startswith("__glibc")]  # pure Python: any glibc will do
    installed = install(pypi_workspace / "channel", ["demo-pkg"], None, tmp_path / "prefix")
    assert installed["demo-pkg"].startswith("pyh")  # noarch: python
    site = tmp_path / "prefix" / "lib" / "python3.12" / "site-packages"
    assert (site / "demo_pkg-1.0.dist-info" / "INSTALLER").read_text() == "conda\n"
    imported = subprocess.run([sys.executable, "-c", "import demo_pkg; print(demo_pkg.VERSION, demo_pkg.__file__)"],
                              env={"PYTHONPATH": str(site)}, capture_output=True, text=True)
    assert imported.stdout.split() == ["1.0", str(site / "demo_pkg" / "__init__.py")], imported.stderr


def test_add_refuses_a_wheel_without_a_license_file_until_given_the_license_text(index, pypi_workspace, capsys, tmp_path):
    url, _ = index
    table = pypi_workspace / "variants" / "pypi.yaml"
    before = table.read_text()
    code, out = run(capsys, "pypi", "add", "bare-pkg==1.0", "--pypi-url", f"{url}/pypi")
    assert code == 2 and len(out.strip().splitlines()) == 1, out
    assert "bare_pkg-1.0-py3-none-any.whl ships no license file" in out and "--license-file FILE" in out and "MIT" in out
    assert table.read_text() == before
    text = tmp_path / "MIT.txt"
    text.write_text("bare-pkg 1.0 ships no license file; its METADATA says License: MIT. The MIT license's text:\n")
    code, out = run(capsys, "pypi", "add", "bare-pkg==1.0", "--pypi-url", f"{url}/pypi", "--license-file", text)
    assert code == 0 and "the package carries recipes/pypi/licenses/bare-pkg/MIT.txt" in out, out
    assert entry_of(pypi_workspace, "bare-pkg")["license_file"] == "licenses/bare-pkg/MIT.txt"
    assert (pypi_workspace / "recipes/pypi/licenses/bare-pkg/MIT.txt").read_text() == text.read_text()
    assert run(capsys, "pypi", "add", "bare-pkg==1.0", "--pypi-url", f"{url}/pypi")[0] == 0  # a refresh keeps it
    assert entry_of(pypi_workspace, "bare-pkg")["license_file"] == "licenses/bare-pkg/MIT.txt"
    code, out = run(capsys, "pypi", "add", "demo-pkg==1.0", "--pypi-url", f"{url}/pypi", "--license-file", text)
    assert code == 2 and "ships its own license files (demo_pkg-1.0.dist-info/licenses/LICENSE): drop --license-file" in out
    assert "demo-pkg" not in yaml.safe_load(table.read_text())["packages"]

    # the license text is an input of its own package only: editing it rebuilds bare-pkg, not demo-pkg
    from orchestrate import runner
    from orchestrate.options import Options

    assert run(capsys, "pypi", "add", "demo-pkg==1.0", "--pypi-url", f"{url}/pypi")[0] == 0

    def input_hashes() -> dict[str, str]:
        options = Options(workspace=pypi_workspace, channel=tmp_path / "no-channel", arch=ARCH, source_channels=[])
        return {s.output.name: s.output.input_hash for s in runner.make_plan(options, everything=True).steps}

    before = input_hashes()
    with open(pypi_workspace / "recipes/pypi/licenses/bare-pkg/MIT.txt", "a") as license_text:
        license_text.write("Permission is hereby granted, free of charge, ...\n")
    after = input_hashes()
    assert after["demo-pkg"] == before["demo-pkg"] and after["bare-pkg"] != before["bare-pkg"]


def test_wrong_sha256_is_refused_naming_url_expected_and_actual(index, pypi_workspace, capsys):
    url, releases = index
    assert run(capsys, "pypi", "add", "demo-pkg==1.0", "--pypi-url", f"{url}/pypi")[0] == 0
    table = pypi_workspace / "variants" / "pypi.yaml"
    actual = releases["1.0"][0]["digests"]["sha256"]
    wrong = hashlib.sha256(b"not the wheel").hexdigest()
    table.write_text(table.read_text().replace(actual, wrong))
    code, out = run(capsys, "build", "--arch", ARCH, "--no-source-channels", "-q", "demo-pkg")
    assert code != 0
    line = next(line for line in out.splitlines() if "mismatch" in line)
    assert f"{url}/files/demo_pkg-1.0-py3-none-any.whl" in line and wrong in line and actual in line, out
    assert "variants/pypi.yaml" in line
    assert not list((pypi_workspace / "channel").rglob("demo-pkg-*.conda"))


def test_pins_reports_a_newer_pypi_release(index, pypi_workspace, capsys):
    url, _ = index
    assert run(capsys, "pypi", "add", "demo-pkg==1.0", "--pypi-url", f"{url}/pypi")[0] == 0
    code, out = run(capsys, "pins", "--pypi-url", f"{url}/pypi", "--json")
    assert code == 0, out
    row = next(r for r in json.loads(out)["components"] if r["component"] == "demo-pkg")
    assert (row["pinned"], row["newest"], row["state"]) == ("1.0", "1.1", "newer available")


def test_a_table_version_that_disagrees_with_its_shared_pin_stops_the_plan(index, pypi_workspace, capsys):
    url, _ = index
    assert run(capsys, "pypi", "add", "demo-pkg==1.0", "--pypi-url", f"{url}/pypi", "--version-key", "demo_version")[0] == 0
    (pypi_workspace / "variants" / "shared.yaml").write_text('python: ["3.12"]\ndemo_version: ["1.1"]\n')
    code, out = run(capsys, "plan", "--arch", ARCH, "--no-source-channels")
    assert code == 2 and "demo_version is 1.1" in out and "orchestrate pypi add demo-pkg==1.1" in out, out


def test_the_real_table_pins_every_entry_by_sha256_and_renders():
    """variants/pypi.yaml: flydsl at the pin aiter reads, every entry a wheel with a sha256, and each one a
    planned package of the real recipe set."""
    from orchestrate.pypi_table import load_table

    shared = yaml.safe_load((REPO / "variants" / "shared.yaml").read_text())
    table = load_table(REPO / "variants", shared)
    assert table.entries["flydsl"].version == shared["flydsl_version"][0]
    for entry in table.entries.values():
        assert entry.file.endswith(".whl") and entry.url.endswith("/" + entry.file) and len(entry.sha256) == 64
        assert entry.url.startswith("https://files.pythonhosted.org/packages/")
    # a wheel published without its license (model-hosting-container-standards 0.1.16, rocm-bootstrap 0.3.0: their
    # dist-info holds no license file, so the build would copy none) ships ours: the standard text, saying where the
    # license was read
    unlicensed = {e.name: e.license_file for e in table.entries.values() if e.license_file}
    assert unlicensed == {"model-hosting-container-standards": "licenses/model-hosting-container-standards/LICENSE.txt",
                          "rocm-bootstrap": "licenses/rocm-bootstrap/LICENSE.txt"}
    for name, license_file in unlicensed.items():
        first, _, text = (REPO / "recipes/pypi" / license_file).read_text().partition("\n")
        assert "https://pypi.org/project/" in first and f"License: {table.entries[name].license}" in first
        if table.entries[name].license == "Apache-2.0":
            assert "Apache License\n                           Version 2.0, January 2004" in text
        if table.entries[name].license == "MIT":
            assert "MIT License" in text and "Permission is hereby granted, free of charge" in text


def test_a_fork_that_installs_the_same_module_cannot_meet_the_original():
    """oss-harmony (what vLLM requires) and conda-forge's openai-harmony both install `openai_harmony`: the
    repackaged one carries a run constraint, so a solve never puts both in one environment (one module)."""
    from orchestrate.pypi_table import fill_recipe, load_table

    table = load_table(REPO / "variants")
    template = yaml.safe_load((REPO / "recipes/pypi/recipe.yaml").read_text())
    harmony = fill_recipe(template, table.entries["oss-harmony"])
    assert harmony["requirements"]["run_constraints"] == ["openai-harmony <0.0a0"]
    assert "run_constraints" not in fill_recipe(template, table.entries["flydsl"])["requirements"]


@pytest.mark.parametrize("metadata, license", [
    ({"License": "MIT"}, "MIT"), ({"License": "apache-2.0"}, "Apache-2.0"),
    ({"License-Expression": "MIT OR Apache-2.0", "License": "MIT"}, "MIT OR Apache-2.0"),
    ({"License": "BSD"}, ""), ({"License": "GPL"}, ""), ({"License": "Apache 2.0"}, ""), ({}, "")])
def test_the_table_takes_only_an_spdx_expression_from_a_wheels_metadata(metadata, license):
    """rattler-build accepts SPDX only: a word that is no SPDX id ("BSD", "GPL") is left for the maintainer
    (`pypi add` then says to set it from the license file), not written to the table."""
    from orchestrate.pypi import spdx_license

    assert spdx_license(metadata) == license


def test_a_refresh_keeps_the_entrys_license_file():
    """`pins --bump --write` refreshes an entry through entry_for: a wheel still published without its license keeps
    the table's license_file (else its package could not build again)."""
    from orchestrate.pypi import entry_for
    from orchestrate.pypi_table import Entry, Table

    wheel = make_wheel("1.1", "bare-pkg", license=False)
    previous = Entry("bare-pkg", "bare-pkg", "1.0", "bare_pkg-1.0-py3-none-any.whl", "https://files.pythonhosted.org/x",
                     "0" * 64, noarch=True, depends=(), license_file="licenses/bare-pkg/MIT.txt")
    entry = entry_for("bare-pkg", "1.1", "bare_pkg-1.1-py3-none-any.whl", "https://files.pythonhosted.org/y",
                      hashlib.sha256(wheel).hexdigest(), wheel, True, previous, "3.12", Table(Path("pypi.yaml"), {}, {}), "")
    assert entry["license_file"] == "licenses/bare-pkg/MIT.txt"


def test_add_refuses_a_package_the_recipes_build_before_downloading_anything(capsys):
    """`pypi add vllm==0.33.0` wrote PyPI's CUDA wheel beside our vllm: two `vllm` rows in the plan. The names come
    from the recipes themselves (vllm's, the prebuilt torch's, flash-attn's), and nothing is fetched (a dead URL)."""
    table = (REPO / "variants" / "pypi.yaml").read_text()
    for requirement, recipe in [("vllm==0.33.0", "recipes/vllm/recipe.yaml"), ("torch==2.14.0", "recipes/pytorch-"),
                                ("flash_attn==2.8.3", "recipes/flash-attn/recipe.yaml")]:
        code, out = run(capsys, "pypi", "add", requirement, "--workspace", REPO, "--pypi-url", "http://127.0.0.1:9/pypi")
        assert code == 2 and len(out.strip().splitlines()) == 1, out
        assert "is built by this project" in out and recipe in out, out
    assert (REPO / "variants" / "pypi.yaml").read_text() == table


def test_add_warns_when_the_version_misses_a_pin_a_recipe_or_another_wheels_metadata_holds(index, pypi_workspace, capsys):
    """conch-triton-kernels==1.3 was taken although vLLM's recipe requires ==1.2.1: the plan then cannot solve."""
    url, _ = index
    (pypi_workspace / "recipes" / "needs-demo").mkdir()
    (pypi_workspace / "recipes" / "needs-demo" / "recipe.yaml").write_text(
        "package: {name: needs-demo, version: '1'}\nrequirements:\n  run:\n    - demo-pkg ==1.1\n")
    code, out = run(capsys, "pypi", "add", "demo-pkg==1.0", "--pypi-url", f"{url}/pypi")
    assert code == 0, out
    assert "warning: recipes/needs-demo/recipe.yaml requires demo-pkg ==1.1, which 1.0 does not satisfy" in out
    assert "orchestrate pypi add demo-pkg==1.1" in out
    code, out = run(capsys, "pypi", "add", "demo-pkg==1.1", "--pypi-url", f"{url}/pypi")
    assert code == 0 and "warning" not in out, out


def test_the_real_recipes_pin_conch_triton_kernels_where_pypi_add_looks():
    from orchestrate.pypi import pins_on, unsatisfied
    from orchestrate.pypi_table import load_table

    pins = pins_on(REPO, load_table(REPO / "variants"), "conch-triton-kernels", exclude="conch-triton-kernels")
    assert ("recipes/vllm/recipe.yaml", "==1.2.1") in pins
    assert unsatisfied("==1.2.1", "1.3") and not unsatisfied("==1.2.1", "1.2.1") and not unsatisfied("1.2.*", "1.2.5")
