"""AMD's prebuilt artifacts, pinned without guessing: `orchestrate pins --lock` reads a loopback index (PEP 503
HTML with #sha256= fragments, or PEP 691 JSON) serving synthetic wheels named as AMD names them, and writes
variants/prebuilt-lock.yaml; what it cannot lock is one line each; a build never downloads a file without a
sha256; an architecture whose device wheel the index lacks gets PyTorch from source, and `plan` says why.
Nothing here reaches AMD."""
from __future__ import annotations

import hashlib
import io
import json
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml

from orchestrate.architectures import ArchitectureTable, write_variant_files
from source_helpers import CountingServer

REPO = Path(__file__).resolve().parent.parent
ARCHS = ArchitectureTable.load(REPO / "variants").names()
TWO_ARCHS = ("gfx1151", "gfx908")
ROCM, TORCH = "10.1.0", "2.14.0"
LOCAL = f"{TORCH}+rocm{ROCM}"

# The files AMD's multi-arch index serves for one release, by project (wheel names as pip sees them).
def amd_files(archs=TWO_ARCHS) -> dict[str, list[str]]:
    files = {
        "rocm": [f"rocm-{ROCM}.tar.gz", "rocm-10.0.0.tar.gz", "rocm-10.2.0rc1.tar.gz"],
        "rocm-sdk-core": [f"rocm_sdk_core-{ROCM}-py3-none-linux_x86_64.whl"],
        "torch": [f"torch-{LOCAL}-cp312-cp312-linux_x86_64.whl", f"torch-{LOCAL}-cp311-cp311-linux_x86_64.whl",
                  f"torch-2.13.0+rocm{ROCM}-cp312-cp312-linux_x86_64.whl", "torch-2.15.0+rocm10.2.0-cp312-cp312-linux_x86_64.whl"],
    }
    for arch in archs:
        files[f"rocm-sdk-device-{arch}"] = [f"rocm_sdk_device_{arch}-{ROCM}-py3-none-linux_x86_64.whl"]
        files[f"amd-torch-device-{arch}"] = [f"amd_torch_device_{arch}-{LOCAL}-cp312-cp312-linux_x86_64.whl"]
    return files


PREBUILT_YAML = """index: {index}
artifacts:
  rocm_sdk_core: {{project: rocm-sdk-core, version: "{{rocm_sdk_version}}"}}
  rocm_sdk_device: {{project: "rocm-sdk-device-{{gpu_arch}}", version: "{{rocm_sdk_version}}", per_arch: true}}
  torch: {{project: torch, version: "{{pytorch_version}}+rocm{{rocm_sdk_version}}", python: true, pytorch: true}}
  amd_torch_device: {{project: "amd-torch-device-{{gpu_arch}}", version: "{{pytorch_version}}+rocm{{rocm_sdk_version}}", per_arch: true, python: true, pytorch: true}}
"""

SHARED_YAML = f"""python: ["3.12"]
pytorch_from: [prebuilt]
rocm_sdk_version: ["{ROCM}"]
pytorch_version: ["{TORCH}"]
c_stdlib_version: ["2.28"]
"""

SCRIPT = "mkdir -p $PREFIX/share/{name} && echo ok > $PREFIX/share/{name}/ok"
RECIPES = {
    # the arch-neutral host package: AMD's core wheel
    "rocm-sdk": """package: {name: rocm-sdk, version: "10.1.0"}
source:
  - url: ${{ rocm_sdk_core_url }}
    sha256: ${{ rocm_sdk_core_sha256 }}
    file_name: rocm_sdk_core.whl
build:
  string: h${{ hash }}_${{ build_number }}
  script: [SCRIPT]
""",
    "rocm-sdk-device": """package: {name: "rocm-sdk-device-${{ gpu_arch }}", version: "10.1.0"}
source:
  - url: ${{ rocm_sdk_device_url }}
    sha256: ${{ rocm_sdk_device_sha256 }}
    file_name: rocm_sdk_device.whl
build:
  string: ${{ gpu_arch }}_h${{ hash }}_${{ build_number }}
  script: [SCRIPT]
requirements:
  run_constraints: ["__amdgpu_arch ==${{ amdgpu_isa }}"]
""",
    "pytorch-prebuilt": """package: {name: pytorch, version: "2.14.0"}
source:
  - url: ${{ torch_url }}
    sha256: ${{ torch_sha256 }}
    file_name: torch.whl
  - url: ${{ amd_torch_device_url }}
    sha256: ${{ amd_torch_device_sha256 }}
    file_name: amd_torch_device.whl
build:
  skip: pytorch_from == "source"
  string: rocm101_${{ gpu_arch }}_h${{ hash }}_${{ build_number }}
  script: [SCRIPT]
requirements:
  host: [rocm-sdk, "rocm-sdk-device-${{ gpu_arch }}"]
""",
    "pytorch-source": """package: {name: pytorch, version: "2.14.0"}
build:
  skip: pytorch_from == "prebuilt"
  string: rocm101_${{ gpu_arch }}_src_h${{ hash }}_${{ build_number }}
  script: [SCRIPT]
requirements:
  host: [rocm-sdk]
extra:
  estimate: {build_minutes: 60}
""",
    "composable-kernel": """package: {name: composable-kernel, version: "1.3.0"}
build:
  string: ${{ gpu_arch }}_h${{ hash }}_${{ build_number }}
  script: [SCRIPT]
requirements:
  host: [rocm-sdk]
""",
    "rocm-stack": """package: {name: rocm-stack, version: "2.14.0"}
build:
  string: ${{ gpu_arch }}_h${{ hash }}_${{ build_number }}
  script: [SCRIPT]
requirements:
  run: [pytorch]
extra:
  origin: metapackage
""",
}


class IndexServer(CountingServer):
    """CountingServer that answers a project page (a folder) with its index.json as PEP 691 JSON."""

    SCRIPT = CountingServer.SCRIPT.replace("""        return super().do_GET()""", """        page = os.path.join(root, self.path.lstrip("/"), "index.json")
        if self.path.endswith("/") and os.path.isfile(page):
            body = open(page, "rb").read()
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        return super().do_GET()""").replace("import sys\n", "import os, sys\n")


def wheel_bytes(name: str) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(f"{name.split('-')[0]}/__init__.py", f"# synthetic {name}\n")
    return buffer.getvalue()


def make_index(root: Path, files: dict[str, list[str]], style: str = "html", no_hash: set[str] = frozenset(),
               lie_about: set[str] = frozenset()) -> dict[str, str]:
    """AMD's index under root/simple/: files in root/files/, one page per project (PEP 503 HTML with
    #sha256= fragments, or PEP 691 JSON). `no_hash`: published without a hash; `lie_about`: the hash
    published is not the file's. Returns file name -> true sha256."""
    (root / "files").mkdir(parents=True, exist_ok=True)
    digests = {}
    for project, names in files.items():
        page = root / "simple" / project
        page.mkdir(parents=True, exist_ok=True)
        entries = []
        for name in names:
            data = wheel_bytes(name)
            (root / "files" / name).write_bytes(data)
            digests[name] = hashlib.sha256(data).hexdigest()
            published = hashlib.sha256(b"other bytes").hexdigest() if name in lie_about else digests[name]
            entries.append((name, f"../../files/{name.replace('+', '%2B')}", "" if name in no_hash else published))
        if style == "json":
            (page / "index.json").write_text(json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": [
                {"filename": n, "url": u, "hashes": {"sha256": h} if h else {}} for n, u, h in entries]}))
        else:
            anchors = "\n".join(f'<a href="{u}{"#sha256=" + h if h else ""}">{n}</a><br/>' for n, u, h in entries)
            (page / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{anchors}\n</body></html>\n")
    return digests


@pytest.fixture
def amd_workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "amd-ws"
    for name, text in RECIPES.items():
        folder = workspace / "recipes" / name
        folder.mkdir(parents=True)
        package = "rocm-sdk-device" if name == "rocm-sdk-device" else name.split("-prebuilt")[0].split("-source")[0]
        (folder / "recipe.yaml").write_text(text.replace("SCRIPT", SCRIPT.format(name=package)))
    variants = workspace / "variants"
    variants.mkdir()
    shutil.copy(REPO / "variants" / "architectures.yaml", variants / "architectures.yaml")
    write_variant_files(ArchitectureTable.load(variants), variants)
    (variants / "shared.yaml").write_text(SHARED_YAML)
    (workspace / "orchestrate.toml").write_text("source_channels = []\n")
    return workspace


@pytest.fixture
def serve(amd_workspace: Path, tmp_path: Path):
    """serve(files, style, ...) -> the server, with the workspace's prebuilt.yaml pointing at it."""
    servers = []

    def start(files=None, style="html", **kwargs) -> IndexServer:
        root = tmp_path / f"index-{len(servers)}"
        root.mkdir()
        digests = make_index(root, amd_files() if files is None else files, style, **kwargs)
        server = IndexServer(root).__enter__()
        servers.append(server)
        server.index, server.digests = f"{server.url}/simple/", digests
        (amd_workspace / "variants" / "prebuilt.yaml").write_text(PREBUILT_YAML.format(index=server.index))
        return server

    yield start
    for server in servers:
        server.__exit__(None, None, None)


@pytest.fixture
def run(amd_workspace: Path, orchestrate, monkeypatch):
    monkeypatch.chdir(amd_workspace)
    return lambda *args: orchestrate(*args, "--workspace", amd_workspace) if args[0] != "pins" else \
        orchestrate("pins", "--workspace", amd_workspace, *args[1:])


def lock_of(workspace: Path) -> dict:
    return yaml.safe_load((workspace / "variants" / "prebuilt-lock.yaml").read_text())


def one_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    assert len(lines) == 1, text
    return lines[0]


def row(out: str, package: str, marker: str = "") -> str:
    return next(line for line in out.splitlines() if line.split()[1:2] == [package] and marker in line)


@pytest.mark.parametrize("style", ["html", "json"])
def test_pins_lock_pins_every_file_by_the_index_hash_and_records_an_absent_device_wheel(style, serve, run,
                                                                                       amd_workspace):
    files = amd_files()
    del files["amd-torch-device-gfx908"]  # AMD publishes no PyTorch device wheel for gfx908 here
    server = serve(files, style)
    result = run("pins", "--lock")
    assert result.code == 0, result.err
    assert "wrote" in result.out and "commit it" in result.out
    text = (amd_workspace / "variants" / "prebuilt-lock.yaml").read_text()
    assert text.startswith(f"# Written by `orchestrate pins --lock` from {server.index} on ")
    lock = lock_of(amd_workspace)
    assert lock["index"] == server.index
    torch = lock["artifacts"]["torch"]
    assert torch["file"] == f"torch-{LOCAL}-cp312-cp312-linux_x86_64.whl"  # this Python's wheel, this version
    assert torch["sha256"] == server.digests[torch["file"]]
    assert torch["url"] == f"{server.url}/files/torch-{TORCH}%2Brocm{ROCM}-cp312-cp312-linux_x86_64.whl"
    device = lock["artifacts"]["rocm_sdk_device"]
    assert device["gfx1151"]["sha256"] == server.digests[f"rocm_sdk_device_gfx1151-{ROCM}-py3-none-linux_x86_64.whl"]
    assert "the index has no amd-torch-device-gfx908" in lock["artifacts"]["amd_torch_device"]["gfx908"]["absent"]
    assert "gfx1151" in lock["artifacts"]["amd_torch_device"]
    # a stable order: the table's order of architectures, so re-locking an unchanged index changes nothing
    assert list(lock["artifacts"]["amd_torch_device"]) == [a for a in ARCHS if a in lock["artifacts"]["amd_torch_device"]]
    said = next(line for line in result.out.splitlines() if "absent: the index has no amd-torch-device-<gfx> for" in line)
    assert "gfx908" in said and "gfx1151" not in said and said.endswith("(those architectures build PyTorch from source)")


def test_a_file_without_a_hash_on_the_index_is_locked_by_one_download_and_a_missing_one_is_named(serve, run,
                                                                                                 amd_workspace):
    name = f"torch-{LOCAL}-cp312-cp312-linux_x86_64.whl"
    server = serve(no_hash={name})
    result = run("pins", "--lock")
    assert result.code == 0, result.err
    torch = lock_of(amd_workspace)["artifacts"]["torch"]
    assert torch["sha256"] == server.digests[name] and torch["evidence"].startswith("computed from download 20")
    assert torch["size"] == len(wheel_bytes(name))
    assert server.downloads[f"files/{name.replace('+', '%2B')}"] == 1
    (server.root / "files" / name).unlink()  # listed, but gone: not locked, named, and the rest still is
    (amd_workspace / "variants" / "prebuilt-lock.yaml").unlink()
    result = run("pins", "--lock")
    assert result.code == 1
    line = one_line(result.err)
    assert line.startswith("torch: the index lists ") and "HTTP 404" in line and "not locked" in line
    assert "torch" not in lock_of(amd_workspace)["artifacts"] and "rocm_sdk_core" in lock_of(amd_workspace)["artifacts"]


def test_missing_project_and_version_and_unreachable_index_are_one_line_each(serve, run, amd_workspace):
    files = amd_files()
    files["torch"] = [f for f in files["torch"] if LOCAL not in f]
    serve(files)
    result = run("pins", "--lock")
    assert result.code == 1
    line = one_line(result.err)
    assert f"torch has no {LOCAL}" in line and "newest there: 2.13.0+rocm10.1.0, 2.15.0+rocm10.2.0" in line
    del files["rocm-sdk-core"]
    serve(files)
    assert "has no project rocm-sdk-core" in run("pins", "--lock").err
    (amd_workspace / "variants" / "prebuilt.yaml").write_text(PREBUILT_YAML.format(index="http://127.0.0.1:9/simple/"))
    result = run("pins", "--lock")
    assert result.code == 2
    assert "cannot reach http://127.0.0.1:9/simple/" in one_line(result.err)


def test_plan_says_where_each_package_comes_from_and_falls_back_to_source_without_a_device_wheel(serve, run):
    files = amd_files()
    del files["amd-torch-device-gfx908"]
    serve(files)
    assert run("pins", "--lock").code == 0
    prebuilt = run("plan", "--arch", "gfx1151", "-q")
    assert prebuilt.code == 0, prebuilt.err
    assert "prebuilt wheel" in row(prebuilt.out, "pytorch", "will build")
    assert "prebuilt wheel" in row(prebuilt.out, "rocm-sdk")
    assert "metapackage" in row(prebuilt.out, "rocm-stack")
    assert "pytorch_from=prebuilt" in row(prebuilt.out, "pytorch", "skipped")  # the source recipe, and why
    source = run("plan", "--arch", "gfx908", "-q")
    assert source.code == 0, source.err
    assert "PyTorch from source for this architecture: prebuilt-lock.yaml records that the index has no " \
           "amd-torch-device-gfx908" in source.out
    assert "source build" in row(source.out, "pytorch", "will build")
    forced = run("plan", "--arch", "gfx908", "--variant", "pytorch_from=prebuilt")
    assert forced.code == 2
    assert "pytorch_from=prebuilt is not possible for gfx908: prebuilt-lock.yaml records that the index has no " \
           "amd-torch-device-gfx908" in one_line(forced.err)
    asked = run("plan", "--arch", "gfx1151", "--variant", "pytorch_from=source", "-q")
    assert "source build" in row(asked.out, "pytorch", "will build")
    assert "asked for with --variant pytorch_from=source" in asked.out


def test_mi100_flash_attention_needs_pytorch_from_source(serve, run):
    serve()
    assert run("pins", "--lock").code == 0
    result = run("plan", "--arch", "gfx908", "--variant", "aotriton_mi100_fa=true", "-q")
    assert result.code == 0, result.err
    assert "source build" in row(result.out, "pytorch", "will build")
    assert "aotriton_mi100_fa=true" in result.out


def test_the_default_plan_is_rocm_stacks_closure_and_says_why_each_is_in_or_out(serve, run):
    serve()
    assert run("pins", "--lock").code == 0
    result = run("plan", "--arch", "gfx1151", "-q")
    ck = row(result.out, "composable-kernel")
    assert "not needed" in ck and "not needed by rocm-stack" in ck
    assert "  orchestrate build composable-kernel" in result.out.splitlines()  # the hint, on its own line
    assert "rocm-stack needs it" in row(result.out, "pytorch", "will build")
    assert "rocm-stack needs it (through pytorch)" in row(result.out, "rocm-sdk")
    asked = run("build-all", "composable-kernel", "--arch", "gfx1151", "--dry-run", "-q")
    assert "will build" in row(asked.out, "composable-kernel") and "asked for" in row(asked.out, "composable-kernel")
    everything = run("plan", "--all", "--arch", "gfx1151", "-q")
    assert "will build" in row(everything.out, "composable-kernel")


def test_an_unlocked_artifact_is_never_downloaded(serve, run, amd_workspace):
    server = serve()
    plan = run("plan", "--arch", "gfx1151", "-q")
    assert "without a sha256 yet (rocm-sdk-core)" in row(plan.out, "rocm-sdk")  # plan still plans, and says so
    assert "  orchestrate pins --lock" in plan.out.splitlines()  # with the command that locks, on its own line
    result = run("build-all", "--arch", "gfx1151", "--offline")
    assert result.code == 2
    line = one_line(result.err)
    assert line.startswith(f"error: rocm-sdk: {server.index}rocm-sdk-core/ has no sha256") and "orchestrate pins --lock" in line
    (amd_workspace / "variants" / "prebuilt.yaml").write_text(PREBUILT_YAML.format(index="http://127.0.0.1:9/simple/"))
    result = run("build-all", "--arch", "gfx1151")  # networked, but the index cannot be reached to lock
    assert result.code == 2
    assert "locking AMD artifacts from http://127.0.0.1:9/simple/" in result.out
    line = one_line(result.err)
    assert "cannot reach http://127.0.0.1:9/simple/" in line and "orchestrate pins --lock" in line
    assert not [path for path in server.downloads if path.startswith("files/")]
    assert not (amd_workspace / "channel").exists() or not list((amd_workspace / "channel").rglob("*.conda"))


def test_a_url_source_without_a_checksum_is_refused_before_any_download(orchestrate, workspace, tmp_path):
    root = tmp_path / "upstream"
    root.mkdir()
    (root / "thing-1.0.tar.gz").write_bytes(b"not even a tarball")
    with CountingServer(root) as server:
        (workspace / "recipes" / "thing").mkdir()
        (workspace / "recipes" / "thing" / "recipe.yaml").write_text(
            f"package: {{name: thing, version: '1.0'}}\nsource:\n  - url: {server.url}/thing-1.0.tar.gz\n"
            "build:\n  script: [echo]\n")
        result = orchestrate("build", "thing", "--arch", "gfx1151")
        assert result.code == 2
        assert one_line(result.err) == (f"error: thing: {server.url}/thing-1.0.tar.gz has no sha256 (in the recipe or "
                                        "variants/prebuilt-lock.yaml): run `orchestrate pins --lock`")
        assert server.downloads == {}


def test_build_all_locks_first_and_a_hash_mismatch_names_url_expected_and_actual(serve, run, amd_workspace):
    core = f"rocm_sdk_core-{ROCM}-py3-none-linux_x86_64.whl"
    server = serve(lie_about={core})  # the index publishes a hash the file does not have
    result = run("build-all", "--arch", "gfx1151", "-q")
    assert "locking AMD artifacts from " + server.index in result.out
    assert lock_of(amd_workspace)["artifacts"]["rocm_sdk_core"]["file"] == core
    assert result.code == 1
    failed = next(line for line in result.err.splitlines() if line.startswith("FAILED rocm-sdk-"))
    assert f"sha256 mismatch for {server.url}/files/{core}" in failed
    assert f"expected {hashlib.sha256(b'other bytes').hexdigest()}, actual {server.digests[core]}" in failed
    assert "orchestrate pins --lock" in failed


def test_pins_reports_amds_newest_stable_rocm_and_torch_for_our_line(serve, amd_workspace, monkeypatch):
    from orchestrate import pins
    from orchestrate.upstreams import Pins

    server = serve()
    monkeypatch.setenv("ORCHESTRATE_AMD_INDEX", server.index)
    rows = {r["what"]: r for r in pins.amd_index_rows(amd_workspace, Pins("gfx1151", {"rocm_sdk_version": "10.0.0",
                                                                                    "pytorch_version": "2.14.0"}), 5)}
    assert rows["ROCm (rocm)"]["newest"] == ROCM  # 10.2.0rc1 is a pre-release
    assert rows["torch 2.14.*+rocm10.0.*"]["newest"] is None
    assert rows["torch (any)"]["newest"] == "2.15.0+rocm10.2.0"
    rows = {r["what"]: r for r in pins.amd_index_rows(amd_workspace, Pins("gfx1151", {"rocm_sdk_version": ROCM,
                                                                                    "pytorch_version": "2.14.0"}), 5)}
    assert rows["torch 2.14.*+rocm10.1.*"]["newest"] == LOCAL


def real_index_files(workspace: Path) -> dict[str, list[str]]:
    """Every file the real variants/prebuilt.yaml declares, for every architecture, named as AMD names them."""
    from orchestrate.prebuilt import Prebuilt

    variants = workspace / "variants"
    prebuilt = Prebuilt.load(variants)
    shared = yaml.safe_load((variants / "shared.yaml").read_text())
    table = ArchitectureTable.load(variants)
    files: dict[str, list[str]] = {}
    for artifact in prebuilt.artifacts.values():
        for arch in ARCHS if artifact.per_arch else ARCHS[:1]:
            values = {**shared, **table.get(arch).variant_keys()}
            if not artifact.applies(values):
                continue
            project, version = artifact.project_for(values, arch), artifact.version_for(values, arch)
            tag = "cp312-cp312-linux_x86_64" if artifact.python else "py3-none-linux_x86_64"
            name = f"{project}-{version}.tar.gz" if project == "rocm" else \
                f"{project.replace('-', '_')}-{version}-{tag}.whl"
            files.setdefault(project, []).append(name)
    return files


def test_the_real_declarations_lock_every_file_and_the_real_recipes_plan_with_them(tmp_path, orchestrate, monkeypatch):
    """The real variants/prebuilt.yaml and recipes, against an index holding what they declare: `pins --lock`
    pins every file (the family wheel only for the architectures that have one), and every architecture's
    default plan then has nothing left to lock and takes PyTorch from AMD's wheels."""
    workspace = tmp_path / "real"
    shutil.copytree(REPO / "recipes", workspace / "recipes")
    shutil.copytree(REPO / "variants", workspace / "variants")
    shutil.copytree(REPO / "patches", workspace / "patches")
    (workspace / "orchestrate.toml").write_text("source_channels = []\n")
    root = tmp_path / "index"
    make_index(root, real_index_files(workspace))
    with IndexServer(root) as server:
        declared = (workspace / "variants" / "prebuilt.yaml").read_text()
        index = "https://stable.repo.amd.com/rocm/whl-next/"
        assert f"index: {index}" in declared
        (workspace / "variants" / "prebuilt.yaml").write_text(declared.replace(f"index: {index}", f"index: {server.url}/simple/"))
        monkeypatch.chdir(workspace)
        result = orchestrate("pins", "--workspace", workspace, "--lock")
        assert result.code == 0, result.err
        lock = lock_of(workspace)["artifacts"]
        families = {arch: ArchitectureTable.load(workspace / "variants").get(arch).torch_device_family for arch in ARCHS}
        assert set(lock["torch_device_family"]) == {arch for arch, family in families.items() if family}
        assert set(lock["torch_device"]) == set(lock["rocm_sdk_device"]) == set(ARCHS)
        assert not [e for e in lock.values() for x in ([e] if "sha256" in e or "absent" in e else e.values()) if "absent" in x]
        for arch in ("gfx1151", "gfx942"):
            plan = orchestrate("plan", "--workspace", workspace, "--arch", arch, "-q")
            assert plan.code == 0, plan.err
            assert "without a sha256" not in plan.out
            assert "prebuilt wheel" in row(plan.out, "pytorch", "will build")
        assert not [path for path in server.downloads if path.startswith("/files/") or path.startswith("files/")]


def test_fetch_locks_first_as_build_all_does_and_says_so_in_one_line_where_the_index_cannot_be_reached(
        serve, run, amd_workspace):
    """Quickstart step 2 on a fresh checkout (issue 32): `fetch` completes the lock where AMD's index answers, then
    fetches what it pins; where it does not answer, one line names the index and the fix, and nothing is fetched."""
    server = serve()
    result = run("fetch", "--arch", "gfx1151", "rocm-sdk", "-q")
    assert result.code == 0, result.err
    assert "locking AMD artifacts from " + server.index in result.out
    assert lock_of(amd_workspace)["artifacts"]["rocm_sdk_core"]["sha256"] == \
        server.digests[f"rocm_sdk_core-{ROCM}-py3-none-linux_x86_64.whl"]
    assert f"fetched     rocm-sdk  {server.url}/files/rocm_sdk_core-{ROCM}-py3-none-linux_x86_64.whl" in \
        result.out.splitlines()
    (amd_workspace / "variants" / "prebuilt-lock.yaml").unlink()
    (amd_workspace / "variants" / "prebuilt.yaml").write_text(PREBUILT_YAML.format(index="http://127.0.0.1:9/simple/"))
    offline = run("fetch", "--arch", "gfx1151", "rocm-sdk", "-q")
    assert offline.code == 2
    assert "cannot reach http://127.0.0.1:9/simple/" in one_line(offline.err)
    assert "orchestrate pins --lock" in one_line(offline.err)
    lock = run("pins", "--lock")  # exit 2 as docs/when-something-fails.md says: stopped, nothing written
    assert lock.code == 2 and "cannot reach http://127.0.0.1:9/simple/" in one_line(lock.err)
    assert not (amd_workspace / "variants" / "prebuilt-lock.yaml").exists()
