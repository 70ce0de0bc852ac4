"""`orchestrate pins` against servers on 127.0.0.1 only: a PyPI-style JSON API (http.server in a thread) and
local git repositories with tags. The pinned versions are read from the real variants/shared.yaml, so these
tests follow the pins wherever they move."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from orchestrate.cli import main
from orchestrate.pypi_table import load_table

REPO = Path(__file__).resolve().parent.parent
SHARED = yaml.safe_load((REPO / "variants" / "shared.yaml").read_text())
PIN = {key: str(value[0]) for key, value in SHARED.items() if isinstance(value, list)}


def newer(version: str) -> str:
    """A release one minor above the pin."""
    major, minor = (list(Version(version).release) + [0])[:2]
    return f"{major}.{minor + 1}.0"


class PyPI(BaseHTTPRequestHandler):
    """/pypi/<name>/json and /pypi/<name>/<version>/json from the server's `documents`."""

    def do_GET(self):  # noqa: N802 (http.server's naming)
        document = self.server.documents.get(self.path)
        body = b'{"message": "Not Found"}' if document is None else document if isinstance(document, bytes) else \
            document.encode() if isinstance(document, str) else json.dumps(document).encode()
        self.send_response(200 if document is not None else 404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def pypi():
    server = ThreadingHTTPServer(("127.0.0.1", 0), PyPI)
    server.documents = {}
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def publish(name: str, releases: list[str], requires: dict[str, list[str]] | None = None,
                per_version: bool = True, yanked: tuple = (), wheel_requires: dict[str, list[str]] | None = None):
        """A project whose current version is its highest stable release; requires: version -> requires_dist
        of the JSON API (its first upload's); wheel_requires: version -> a Linux wheel's own metadata (PEP 658)."""
        requires, wheel_requires = requires or {}, wheel_requires or {}
        stable = [r for r in releases if not Version(r).is_prerelease]
        latest = max(stable or releases, key=Version)
        for path in [p for p in server.documents if p.startswith(f"/pypi/{name}/")]:
            del server.documents[path]  # publishing again replaces the project
        server.documents[f"/pypi/{name}/json"] = {
            "info": {"name": name, "version": latest, "requires_dist": requires.get(latest)},
            "releases": {r: [{"filename": f"{name}-{r}.tar.gz", "yanked": r in yanked, "url": f"../../packages/{name}-{r}.tar.gz"}]
                         for r in releases},
        }
        for release, lines in wheel_requires.items():
            wheel = f"{name}-{release}-cp38-abi3-manylinux_2_28_x86_64.whl"
            server.documents[f"/pypi/{name}/json"]["releases"][release].append(
                {"filename": wheel, "yanked": False, "url": f"../../packages/{wheel}", "core-metadata": {"sha256": "0"}})
            server.documents[f"/packages/{wheel}.metadata"] = (
                f"Metadata-Version: 2.1\nName: {name}\nVersion: {release}\n" + "".join(f"Requires-Dist: {l}\n" for l in lines))
        for release in releases if per_version else []:
            server.documents[f"/pypi/{name}/{release}/json"] = {
                "info": {"name": name, "version": release, "requires_dist": requires.get(release)}}

    publish.url = f"http://127.0.0.1:{server.server_address[1]}/pypi"
    publish.documents = server.documents
    yield publish
    server.shutdown()
    server.server_close()


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@localhost", "PATH": "/usr/bin:/bin",
                               "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(cwd)}).stdout.strip()


def make_repo(base: Path, name: str, tags: list[str]) -> dict[str, str]:
    """A repository at base/OWNER/REPO with one commit per tag (annotated tags every other one); tag -> commit."""
    repo = base / name
    repo.mkdir(parents=True)
    git("init", "-q", cwd=repo)
    commits = {}
    for n, tag in enumerate(tags):
        (repo / "file.txt").write_text(tag)
        git("add", "file.txt", cwd=repo)
        git("commit", "-q", "-m", tag, cwd=repo)
        git("tag", *(["-a", "-m", tag] if n % 2 else []), tag, cwd=repo)
        commits[tag] = git("rev-parse", "HEAD", cwd=repo)
    return commits


def publish_current_world(pypi, git_base: Path, aiter_tags=("v0.0.1", "v99.0.0rc1")) -> None:
    """Upstream as the tests expect to see it: some pins current, some behind, one ahead of releases."""
    torch, triton, vllm = PIN["pytorch_version"], PIN["triton_version"], PIN["vllm_version"]
    pypi("torch", [torch, newer(torch)], {torch: [f'triton=={triton}; platform_system == "Linux"', "filelock"],
                                          newer(torch): [f"triton~={newer(triton)}"]})
    pypi("triton", [triton])
    pypi("vllm", ["0.1.0", vllm], {vllm: [f"torch=={torch}", 'pytest; extra == "test"']})
    pypi("torchvision", [PIN["torchvision_version"], newer(PIN["torchvision_version"]) + "rc1"],
         {PIN["torchvision_version"]: [f"torch=={torch}"]})
    pypi("torchaudio", [PIN["torchaudio_version"], newer(PIN["torchaudio_version"])],
         {PIN["torchaudio_version"]: [f"torch>={torch}"]}, yanked=(newer(PIN["torchaudio_version"]),))
    pypi("flash-attn", ["1.0.0"])
    pypi("amd-aiter", ["0.0.1.dev1"])
    pypi("flydsl", [PIN["flydsl_version"]])
    for entry in load_table(REPO / "variants").entries.values():  # the packages repackaged from PyPI
        pypi(entry.pypi, [entry.version])
    make_repo(git_base, "ROCm/TheRock", ["therock-" + PIN["rocm_sdk_version"], "pytorch-triage/whatever"])
    make_repo(git_base, "ROCm/aotriton", ["0.99b", "0.100.50tp", "legal-scan"])
    make_repo(git_base, "ROCm/composable_kernel", ["rocm-7.0.0"])
    make_repo(git_base, "ROCm/aiter", list(aiter_tags))


def pins(capsys, *args: str):
    """`orchestrate pins ARGS` (at conftest's wide COLUMNS: the tests read rows)."""
    capsys.readouterr()
    code = main(["pins", "--workspace", str(args[0]), "--timeout", "5", *args[1:]])
    out, err = capsys.readouterr()
    return code, out, err


def row(out: str, component: str) -> str:
    return next(line for line in out.splitlines() if line.split()[:1] == [component])


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_pins_shows_each_pin_beside_upstreams_newest(pypi, tmp_path, capsys, monkeypatch):
    publish_current_world(pypi, tmp_path / "git")
    monkeypatch.setenv("ORCHESTRATE_PYPI_URL", pypi.url)  # the environment variable works like --pypi-url
    code, out, err = pins(capsys, REPO, "--git-base", str(tmp_path / "git"))
    assert code == 0, out + err
    torch = row(out, "pytorch")
    assert PIN["pytorch_version"] in torch and newer(PIN["pytorch_version"]) in torch and "newer available" in torch
    assert "pytorch-v" in torch and "sha256:" in torch  # the recipe's rendered source
    assert row(out, "triton").split()[1] == PIN["triton_version"] and "current" in row(out, "triton")
    assert "current" in row(out, "vllm")
    # pre-releases and yanked releases do not count; a pin above every release is an unreleased commit
    assert "current" in row(out, "torchvision") and "rc1" not in row(out, "torchvision")
    assert "current" in row(out, "torchaudio")
    assert "ahead of releases" in row(out, "flash-attn")
    assert "therock-" in row(out, "rocm-sdk") and "current" in row(out, "rocm-sdk")
    # 0.100.50tp is a preview; PyTorch's aotriton.cmake sets aotriton's pin, so a newer one comes with a PyTorch
    assert "0.99b" in row(out, "aotriton") and "moves with pytorch" in row(out, "aotriton")
    assert "ROCm/aotriton@" in row(out, "aotriton")
    assert "not compared" in row(out, "composable-kernel")
    coupling = next(line for line in out.splitlines() if line.startswith("pytorch <-> triton"))
    assert " ok " in coupling and f"needs triton~={newer(PIN['triton_version'])}" in coupling
    assert "ok" in next(line for line in out.splitlines() if line.startswith("vllm <-> pytorch"))
    assert "checked offline" in next(line for line in out.splitlines() if line.startswith("pytorch <-> aotriton"))
    assert out.splitlines()[-1].startswith("newer upstream: pytorch")


def test_pins_flags_a_broken_coupling(pypi, tmp_path, capsys):
    publish_current_world(pypi, tmp_path / "git")
    pypi("torch", [PIN["pytorch_version"]], {PIN["pytorch_version"]: ["triton==0.0.1"]})
    code, out, _ = pins(capsys, REPO, "--pypi-url", pypi.url, "--git-base", str(tmp_path / "git"))
    assert code == 1
    coupling = next(line for line in out.splitlines() if line.startswith("pytorch <-> triton"))
    assert "BROKEN" in coupling and "triton==0.0.1" in coupling and PIN["triton_version"] in coupling
    assert "broken couplings: pytorch <-> triton" in out.splitlines()[-1]


def test_pins_says_when_pypi_serves_no_metadata_for_the_pin(pypi, tmp_path, capsys):
    publish_current_world(pypi, tmp_path / "git")
    pypi("vllm", [PIN["vllm_version"], newer(PIN["vllm_version"])], {newer(PIN["vllm_version"]): ["torch==9.9.9"]},
         per_version=False)
    code, out, _ = pins(capsys, REPO, "--pypi-url", pypi.url, "--git-base", str(tmp_path / "git"))
    assert code == 0
    coupling = next(line for line in out.splitlines() if line.startswith("vllm <-> pytorch"))
    assert "unknown" in coupling and "served no metadata" in coupling and "needs torch==9.9.9" in coupling


def test_pins_json_for_scripts(pypi, tmp_path, capsys):
    publish_current_world(pypi, tmp_path / "git")
    code, out, _ = pins(capsys, REPO, "--pypi-url", pypi.url, "--git-base", str(tmp_path / "git"), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["ok"] is True and report["pypi_url"] == pypi.url
    by_name = {c["component"]: c for c in report["components"]}
    upstreams = yaml.safe_load((REPO / "variants" / "upstreams.yaml").read_text())["components"]
    repackaged = {e.name: e.version for e in load_table(REPO / "variants").entries.values() if e.name not in upstreams}
    assert set(by_name) == set(upstreams) | set(repackaged)
    for name, spec in upstreams.items():
        assert by_name[name]["pinned"] == PIN[spec["version"]]
    for name, version in repackaged.items():  # variants/pypi.yaml's packages are reported beside them
        assert by_name[name]["pinned"] == version and by_name[name]["state"] == "current"
    assert by_name["pytorch"]["newest"] == newer(PIN["pytorch_version"]) and by_name["pytorch"]["state"] == "newer available"
    assert by_name["triton"]["source"]["rev"] and len(by_name["triton"]["source"]["rev"]) == 40
    assert by_name["aotriton"]["newest_from"] == "git:ROCm/aotriton"
    coupling = next(c for c in report["couplings"] if c["pins"] == ["pytorch", "triton"])
    assert coupling["state"] == "ok" and coupling["pinned"] == {"pytorch": PIN["pytorch_version"], "triton": PIN["triton_version"]}


def test_pins_checks_that_the_pinned_tag_is_the_recipes_commit(pypi, tmp_path, capsys):
    """A tag named like the pin must be the commit the recipe builds; the real recipe's commit is not in a
    local repository, so a copy of the workspace points the aiter recipe at the local tag."""
    workspace = tmp_path / "ws"
    for folder in ("recipes", "variants", "patches"):
        shutil.copytree(REPO / folder, workspace / folder)
    aiter_tag = "v" + PIN["aiter_version"]
    publish_current_world(pypi, tmp_path / "git", aiter_tags=(aiter_tag,))
    code, out, _ = pins(capsys, workspace, "--pypi-url", pypi.url, "--git-base", str(tmp_path / "git"))
    assert code == 1
    assert f"error: tag {aiter_tag} is" in row(out, "aiter") and "the recipe builds" in row(out, "aiter")
    assert "lookups failed: aiter" in out.splitlines()[-1]

    tag_commit = git("rev-parse", f"{aiter_tag}^{{commit}}", cwd=tmp_path / "git" / "ROCm" / "aiter")
    recipe = workspace / "recipes" / "aiter" / "recipe.yaml"
    recipe_yaml = yaml.safe_load(recipe.read_text())
    recipe.write_text(recipe.read_text().replace(recipe_yaml["context"]["aiter_commit"], tag_commit))
    code, out, _ = pins(capsys, workspace, "--pypi-url", pypi.url, "--git-base", str(tmp_path / "git"))
    assert code == 0, out
    assert f"the recipe's commit is tag {aiter_tag}" in row(out, "aiter") and "current" in row(out, "aiter")


def test_pins_without_network_says_so_in_one_line(tmp_path, capsys):
    port = closed_port()
    code, out, err = pins(capsys, REPO, "--pypi-url", f"http://127.0.0.1:{port}/pypi", "--git-base",
                          f"http://127.0.0.1:{port}")
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [f"error: cannot reach PyPI or GitHub (http://127.0.0.1:{port}/pypi, "
                                        f"http://127.0.0.1:{port}): check the network or a proxy"]


def test_pins_shows_partial_failures_in_their_rows(pypi, tmp_path, capsys):
    publish_current_world(pypi, tmp_path / "git")
    port = closed_port()
    code, out, _ = pins(capsys, REPO, "--pypi-url", pypi.url, "--git-base", f"http://127.0.0.1:{port}")
    assert code == 1
    assert "current" in row(out, "triton")
    assert f"error: cannot reach http://127.0.0.1:{port}/ROCm/aotriton" in row(out, "aotriton")
    assert "lookups failed: rocm-sdk, aotriton, composable-kernel, aiter" in out.splitlines()[-1]


def test_pins_refuses_a_pypi_url_that_is_not_http(capsys):
    code, out, err = pins(capsys, REPO, "--pypi-url", "ftp://127.0.0.1/pypi")
    assert code == 2 and "is not an http(s) URL" in err and len(err.strip().splitlines()) == 1


def test_pins_names_an_upstream_whose_version_key_is_not_pinned(tmp_path, capsys):
    workspace = tmp_path / "ws"
    for folder in ("recipes", "variants", "patches"):
        shutil.copytree(REPO / folder, workspace / folder)
    upstreams = workspace / "variants" / "upstreams.yaml"
    upstreams.write_text(upstreams.read_text().replace("version: vllm_version", "version: vllm_verison"))
    code, out, err = pins(capsys, workspace, "--pypi-url", "http://127.0.0.1:9/pypi")
    assert code == 2
    assert err.strip() == ("error: upstreams.yaml: vllm's version key vllm_verison is not a single value in "
                           f"{workspace / 'variants' / 'shared.yaml'}: fix one of them")


def test_pins_trusts_a_wheels_own_metadata_over_the_json_api(pypi, tmp_path, capsys):
    """The JSON API's requires_dist is one answer per release and can be wrong; a wheel's metadata file says
    what the wheel needs, and wins."""
    publish_current_world(pypi, tmp_path / "git")
    torch, triton = PIN["pytorch_version"], PIN["triton_version"]
    pypi("torch", [torch], {torch: ["triton==0.0.1"]}, wheel_requires={torch: [f"triton=={triton}", "filelock"]})
    code, out, _ = pins(capsys, REPO, "--pypi-url", pypi.url, "--git-base", str(tmp_path / "git"))
    coupling = next(line for line in out.splitlines() if line.startswith("pytorch <-> triton"))
    assert code == 0 and " ok " in coupling
    assert f"needs triton=={triton} (torch-{torch}-cp38-abi3-manylinux_2_28_x86_64.whl metadata)" in coupling

    pypi("torch", [torch], {torch: [f"triton=={triton}"]}, wheel_requires={torch: ["triton==0.0.1"]})
    code, out, _ = pins(capsys, REPO, "--pypi-url", pypi.url, "--git-base", str(tmp_path / "git"))
    assert code == 1 and "BROKEN" in next(line for line in out.splitlines() if line.startswith("pytorch <-> triton"))


def test_pins_shows_an_advisory_coupling_without_failing(pypi, tmp_path, capsys):
    """vLLM's PyPI wheels pin one torch for CUDA; our ROCm build needs only vLLM's minimum: shown, not enforced."""
    publish_current_world(pypi, tmp_path / "git")
    pypi("vllm", [PIN["vllm_version"]], {PIN["vllm_version"]: ["torch==0.0.1"]})
    code, out, _ = pins(capsys, REPO, "--pypi-url", pypi.url, "--git-base", str(tmp_path / "git"))
    coupling = next(line for line in out.splitlines() if line.startswith("vllm <-> pytorch"))
    assert code == 0 and " differs " in coupling and "needs torch==0.0.1" in coupling and "(advisory)" in coupling


def test_pins_names_a_wheel_whose_metadata_does_not_parse_instead_of_guessing(pypi, tmp_path, capsys):
    """A wheel's metadata that is not core metadata (a proxy's error page, say) is a read error in the
    coupling's row: neither a traceback nor "needs no particular triton" nor the JSON API's answer."""
    publish_current_world(pypi, tmp_path / "git")
    torch, triton = PIN["pytorch_version"], PIN["triton_version"]
    pypi("torch", [torch], {torch: [f"triton=={triton}"]}, wheel_requires={torch: []})
    wheel = f"torch-{torch}-cp38-abi3-manylinux_2_28_x86_64.whl"
    pypi.documents[f"/packages/{wheel}.metadata"] = "<html>502 Bad Gateway</html>"
    code, out, err = pins(capsys, REPO, "--pypi-url", pypi.url, "--git-base", str(tmp_path / "git"))
    coupling = next(line for line in out.splitlines() if line.startswith("pytorch <-> triton"))
    assert "unknown" in coupling and f"{wheel} is not a readable wheel (" in coupling, coupling
    assert "Traceback" not in err and "PyPI JSON" not in coupling


# The ARGs of vLLM 0.33.0's docker/Dockerfile.rocm_base (its PyPI sdist), as the file has them.
DOCKERFILE_ROCM_BASE = """ARG BASE_IMAGE=ubuntu:22.04
ARG PYTHON_VERSION=3.12
ARG TORCH_VERSION=2.13.0+rocm10.0.0
ARG TRITON_BRANCH="669b31ac" # release/internal/3.8.x as of 09/29/2026
ARG FA_BRANCH="0e60e394"
ARG AITER_BRANCH="v0.1.26"
ARG ROCM_SDK_VERSION=10.0.0
ARG AITER_ROCM_ARCH="gfx942;gfx950"
FROM ${BASE_IMAGE} AS base
ARG AITER_BRANCH
"""


def test_pins_shows_vllms_rocm_set_beside_ours_and_why_they_differ(pypi, tmp_path, capsys):
    import io
    import tarfile
    publish_current_world(pypi, tmp_path / "git")
    vllm = PIN["vllm_version"]
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        data = DOCKERFILE_ROCM_BASE.encode()
        info = tarfile.TarInfo(f"vllm-{vllm}/docker/Dockerfile.rocm_base")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    pypi.documents[f"/packages/vllm-{vllm}.tar.gz"] = buffer.getvalue()
    code, out, err = pins(capsys, REPO, "--pypi-url", pypi.url, "--git-base", str(tmp_path / "git"), "--json")
    found = json.loads(out)["vllm_rocm_set"]
    assert found["source"] == f"vllm-{vllm}.tar.gz docker/Dockerfile.rocm_base"
    rows = {r["arg"]: r for r in found["rows"]}
    assert (rows["AITER_BRANCH"]["vllm"], rows["AITER_BRANCH"]["ours"]) == ("v0.1.26", f"v{PIN['aiter_version']}")
    assert rows["AITER_BRANCH"]["state"] == "differs" and "held" in rows["AITER_BRANCH"]["why"]
    assert rows["TORCH_VERSION"]["ours"] == f"{PIN['prebuilt_pytorch_version']}+rocm{PIN['rocm_sdk_version']}"
    # a short commit is the same as our full one; the architecture lists compare as sets
    assert rows["TRITON_BRANCH"]["state"] == rows["AITER_ROCM_ARCH"]["state"] == "same"
    assert not rows["TRITON_BRANCH"]["why"]
    # the aiter row names the file, so a held aiter is never a silent difference
    aiter = next(r for r in json.loads(out)["components"] if r["component"] == "aiter")
    assert any("docker/Dockerfile.rocm_base has AITER_BRANCH=v0.1.26: held" in n for n in aiter["notes"])
    code, out, err = pins(capsys, REPO, "--pypi-url", pypi.url, "--git-base", str(tmp_path / "git"))
    assert f"vLLM {vllm}'s ROCm set (vllm-{vllm}.tar.gz docker/Dockerfile.rocm_base) beside ours" in out
    del pypi.documents[f"/packages/vllm-{vllm}.tar.gz"]
    code, out, err = pins(capsys, REPO, "--pypi-url", pypi.url, "--git-base", str(tmp_path / "git"))
    assert f"vLLM {vllm}'s ROCm set (docker/Dockerfile.rocm_base) beside ours: not read (" in out
