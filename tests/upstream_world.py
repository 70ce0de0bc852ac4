"""A loopback "upstream world" for `orchestrate pins --bump`, on 127.0.0.1 only.

One HTTP server plays PyPI's JSON API (which may disagree with the files), the files themselves (wheels
with their own METADATA, sdists, release archives; every file answers Range requests), AMD's index (PEP 503
pages with #sha256= fragments) and raw files at a git ref (read from real git repositories in a tmp folder,
which are also --git-base). The server is a child process serving what the test publishes into a folder
(py-rattler-build holds the GIL while `orchestrate fetch` downloads, so a server thread in the test process
would never answer); the ranges it was asked for are appended to a file the test reads (`World.ranges`). `bump_workspace` copies the project's recipes, variants and patches and points
their upstream addresses at the world. A test starts from `baseline()` (upstream as our pins have it) and
publishes what it needs on top."""
from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import MutableMapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
_TABLE = yaml.safe_load((REPO / "variants" / "architectures.yaml").read_text())["architectures"]
ARCHS = list(_TABLE)
# the family wheel each target's device wheel requires, from the table (amd-torch-device-<family>)
FAMILIES = {arch: row["torch_device_family"] for arch, row in _TABLE.items() if row.get("torch_device_family")}
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@localhost", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@localhost", "PATH": "/usr/bin:/bin", "GIT_CONFIG_NOSYSTEM": "1"}
PYTHON_TAG = "cp312"
# the ROCm/triton commit (a key of World.commits) each vLLM sdist's docker/Dockerfile.rocm names
TRITON_KERNELS = {"0.33.0": "rocm-triton-0.33", "0.33.1": "rocm-triton-0.33", "0.34.0": "rocm-triton-0.34"}


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={**GIT_ENV, "HOME": str(cwd)}).stdout.strip()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_wheel(name: str, version: str, requires: list[str], padding: int = 0) -> bytes:
    """A wheel whose only real content is its METADATA (deflated, like pip's wheels); `padding` bytes of
    incompressible data first push the directory away from the start."""
    buffer = io.BytesIO()
    dist = f"{name.replace('-', '_')}-{version}.dist-info"
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        if padding:
            archive.writestr(zipfile.ZipInfo(f"{name.replace('-', '_')}/blob.bin"), hashlib.sha512(version.encode()).digest()
                             * (padding // 64))
        archive.writestr(f"{name.replace('-', '_')}/__init__.py", "")
        archive.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nSummary: {name}\n"
                         + "".join(f"Requires-Dist: {line}\n" for line in requires))
        archive.writestr(f"{dist}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    return buffer.getvalue()


def make_tarball(folder: str, files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{folder}/{path}")
            info.size, info.mtime = len(data), 0
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def preimage(patch: str) -> dict[str, str]:
    """Files a patch applies to: each file's hunks' context and removed lines, in order (git apply finds
    hunks at an offset), so an upstream tree in the world can take our real patches."""
    files: dict[str, list[str]] = {}
    current = None
    for line in patch.splitlines():
        if line == "-- ":  # git format-patch's signature
            break
        if line.startswith("--- "):
            current = line[len("--- a/"):] if line.startswith("--- a/") else None
            if current:
                files.setdefault(current, [])
        elif current and not line.startswith(("+++", "@@", "diff ", "index ", "\\")) and line[:1] in (" ", "-", ""):
            files[current].append(line[1:])
    return {path: "\n".join(lines) + "\n" for path, lines in files.items()}


class Served(MutableMapping):
    """What the server answers, by URL path, kept as files under a folder the server process reads."""

    def __init__(self, folder: Path):
        self.folder = folder

    def _file(self, path: str) -> Path:
        return self.folder / (path.strip("/") + ("/index" if path.endswith("/") else ""))

    def __getitem__(self, path: str) -> bytes:
        try:
            return self._file(path).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            raise KeyError(path) from None

    def __setitem__(self, path: str, data: bytes) -> None:
        self._file(path).parent.mkdir(parents=True, exist_ok=True)
        self._file(path).write_bytes(data)

    def __delitem__(self, path: str) -> None:
        if not self._file(path).is_file():
            raise KeyError(path)
        self._file(path).unlink()

    def __iter__(self):
        return ("/" + str(p.relative_to(self.folder)) for p in self.folder.rglob("*") if p.is_file())

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)


class Handler(BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's naming)
        path = self.path.split("?")[0]
        body, content_type = answer(self.server.root, path)
        with open(self.server.root / "requests.log", "a") as log:
            log.write(path + "\n")
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        ranged = re.match(r"bytes=(\d*)-(\d*)$", self.headers.get("Range", ""))
        if ranged:
            start, end = ranged.groups()
            size = len(body)
            first = size - int(end) if not start else int(start)
            last = size - 1 if not start or not end else min(int(end), size - 1)
            first = max(first, 0)
            with open(self.server.root / "ranges.log", "a") as log:
                log.write(path + "\n")
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
            body = body[first:last + 1]
        else:
            self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def answer(root: Path, path: str) -> tuple[bytes | None, str]:
    """The body and type of a GET: a published file (a PyPI JSON document, an index page, a release file),
    or a file at a ref of one of the world's git repositories (/raw/OWNER/REPO/REF/PATH)."""
    if path.startswith("/raw/"):
        owner, repo, ref, file = path[len("/raw/"):].split("/", 3)
        try:
            return git("show", f"{ref}:{file}", cwd=root / "git" / owner / repo).encode() + b"\n", "text/plain"
        except subprocess.CalledProcessError:
            return None, ""
    served = Served(root / "served")
    for candidate in (path, path.rstrip("/") + "/"):
        if candidate in served:
            kind = "application/json" if path.startswith("/pypi/") else "text/html" if path.startswith("/amd/") else \
                "application/octet-stream"
            return served[candidate], kind
    return None, ""


def serve(root: Path) -> None:
    """The server process: prints its port, then answers until it is killed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.root = root
    print(server.server_address[1], flush=True)
    server.serve_forever()


class World:
    def __init__(self, root: Path):
        self.root = root
        self.git_base = root / "git"
        self.files = Served(root / "served")
        self.files.clear()
        (root / "ranges.log").write_text("")
        (root / "requests.log").write_text("")
        self.process = subprocess.Popen([sys.executable, __file__, str(root)], stdout=subprocess.PIPE, text=True,
                                        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "tests")})
        self.url = f"http://127.0.0.1:{self.process.stdout.readline().strip()}"
        self.pypi_url, self.raw_base, self.amd_index = f"{self.url}/pypi", f"{self.url}/raw", f"{self.url}/amd/"
        self.commits: dict[str, str] = {}
        self._make_repositories()
        self.baseline()

    @property
    def requests(self) -> list[str]:
        """The paths the server was asked for, oldest first."""
        return (self.root / "requests.log").read_text().split()

    @property
    def ranges(self) -> list[str]:
        """The paths the server answered with part of a file, oldest first."""
        return (self.root / "ranges.log").read_text().split()

    def close(self) -> None:
        self.process.kill()
        self.process.wait()

    # ---- publishing ----

    def baseline(self) -> None:
        """Upstream as our pins have it: every pinned release, nothing newer."""
        self.json: dict[str, dict] = {}
        self.files.clear()
        self.amd: dict[str, list[tuple[str, str]]] = {}
        (self.root / "ranges.log").write_text("")
        (self.root / "requests.log").write_text("")
        aiter = self.git_base / "ROCm" / "aiter"
        if "v0.1.21" in git("tag", cwd=aiter).split():
            git("tag", "-d", "v0.1.21", cwd=aiter)
        self.pypi("torch", "2.14.1", ["triton~=3.8.0", "filelock"])
        self.pypi("triton", "3.8.0", [])
        self.pypi("vllm", "0.33.0", ["torch==2.14.0", "torchaudio==2.11.0"], rocm_requires=["conch-triton-kernels==1.2.1"],
                  torch_rocm="2.14.0")
        self.pypi("torchvision", "0.29.1", ["torch==2.14.1"])
        self.pypi("torchaudio", "2.11.0", ["torch==2.14.1"])
        self.pypi("flash-attn", "2.8.3.post2", ["torch"])
        self.pypi("amd-aiter", "0.0.1.dev1", [])
        self.pypi("flydsl", "0.3.1", ["numpy"])
        for entry in yaml.safe_load((REPO / "variants" / "pypi.yaml").read_text())["packages"].values():
            if entry["pypi"] != "flydsl":
                self.pypi(entry["pypi"], str(entry["version"]), [])
        self.rocm("10.1.0", torch="2.14.0", triton="3.8.0+git669b31ac", torchvision="0.29.0a0", torchaudio="2.11.0.3")

    def pypi(self, name: str, version: str, requires: list[str], json_requires: list[str] | None = None,
             rocm_requires: list[str] | None = None, padding: int = 0, torch_rocm: str = "",
             kernels_arg: str = "ROCM_TRITON_KERNELS_COMMIT", sdist_files: dict[str, str] | None = None) -> None:
        """A release with a Linux wheel (its METADATA says `requires`; PyPI's JSON says `json_requires`, by
        default the same) and an sdist (PKG-INFO and, for vLLM, requirements/rocm.txt, CMakeLists.txt's
        TORCH_SUPPORTED_VERSION_ROCM `torch_rocm` and docker/Dockerfile.rocm's triton_kernels commit, as the
        ARG `kernels_arg`, docker/Dockerfile.rocm_base's AITER_BRANCH (our pin); and any further `sdist_files`)."""
        document = self.json.setdefault(f"/pypi/{name}/json", {"info": {"name": name}, "releases": {}})
        document["info"].update({"version": version, "requires_dist": json_requires if json_requires is not None else requires})
        underscored = name.replace("-", "_")
        wheel_name = f"{underscored}-{version}-py3-none-any.whl" if name != "torch" else \
            f"{underscored}-{version}-{PYTHON_TAG}-{PYTHON_TAG}-manylinux_2_28_x86_64.whl"
        wheel = make_wheel(name, version, requires, padding)
        sdist_name = f"{name}-{version}.tar.gz"
        sdist = make_tarball(f"{name}-{version}", {
            "PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                        + "".join(f"Requires-Dist: {line}\n" for line in requires),
            "requirements/common.txt": "regex\n",
            "requirements/rocm.txt": "-r common.txt\n" + "".join(f"{line}\n" for line in rocm_requires or []),
            "docker/Dockerfile.rocm": f"ARG {kernels_arg}={self.commits.get(TRITON_KERNELS.get(version, ''), '0' * 40)}\n",
            # the aiter vLLM's ROCm images build, as vLLM 0.33.0's file writes it (ARG AITER_BRANCH="v0.1.26")
            "docker/Dockerfile.rocm_base": 'ARG AITER_BRANCH="v0.1.20.post1"\n',
            **({"CMakeLists.txt": f'set(TORCH_SUPPORTED_VERSION_ROCM "{torch_rocm}")\n'} if torch_rocm else {}),
            **(sdist_files or {})})
        self.files[f"/files/{wheel_name}"], self.files[f"/files/{sdist_name}"] = wheel, sdist
        document["releases"][version] = [
            {"filename": wheel_name, "url": f"../../files/{wheel_name}", "yanked": False, "digests": {"sha256": sha256(wheel)}},
            {"filename": sdist_name, "url": f"../../files/{sdist_name}", "yanked": False, "digests": {"sha256": sha256(sdist)}}]
        self.files[f"/pypi/{name}/json"] = json.dumps(document).encode()

    def rocm(self, version: str, torch: str, triton: str, torchvision: str, torchaudio: str) -> None:
        """A ROCm release on AMD's index with its PyTorch set (file names as AMD's index has them)."""
        add = self.amd_file
        add("rocm", f"rocm-{version}.tar.gz")
        for part in ("core", "libraries", "devel"):
            add(f"rocm-sdk-{part}", f"rocm_sdk_{part}-{version}-py3-none-linux_x86_64.whl")
        wheel = f"+rocm{version}-{PYTHON_TAG}-{PYTHON_TAG}-linux_x86_64.whl"
        add("torch", f"torch-{torch}{wheel}")
        add("triton", f"triton-{triton}.rocm{version}-{PYTHON_TAG}-{PYTHON_TAG}-linux_x86_64.whl")
        add("torchvision", f"torchvision-{torchvision}{wheel}")
        add("torchaudio", f"torchaudio-{torchaudio}{wheel}")
        for arch in ARCHS:
            add(f"rocm-sdk-device-{arch}", f"rocm_sdk_device_{arch}-{version}-py3-none-linux_x86_64.whl")
            add(f"amd-torch-device-{arch}", f"amd_torch_device_{arch}-{torch}{wheel}")
            add(f"amd-torchvision-device-{arch}", f"amd_torchvision_device_{arch}-{torchvision}{wheel}")
        for family in sorted(set(FAMILIES.values())):
            add(f"amd-torch-device-{family}", f"amd_torch_device_{family.replace('-', '_')}-{torch}{wheel}")

    def amd_file(self, project: str, filename: str) -> None:
        """One more file of a project on AMD's index."""
        data = make_tarball("rocm", {"README": filename}) if filename.endswith(".tar.gz") else filename.encode()
        self.amd.setdefault(project, []).append((filename, sha256(data)))
        self.files[f"/amd-files/{filename}"] = data
        links = "".join(f'<a href="/amd-files/{name}#sha256={digest}">{name}</a>\n' for name, digest in self.amd[project])
        self.files[f"/amd/{project}/"] = f"<html><body>\n{links}</body></html>".encode()

    def archive(self, path: str, content: str) -> bytes:
        """A release archive (GitHub's), served at /github/<path>."""
        data = make_tarball("src", {"README": content})
        self.files[f"/github/{path}"] = data
        return data

    def torch_215(self, vllm_allows: bool = True, json_disagrees: bool = True, vllm_rocm_torch: str = "2.15.0",
                  amd_ships: bool = True, vllm_rocm_requires: tuple[str, ...] = ("conch-triton-kernels==1.2.1",)) -> None:
        """(amd_ships) ROCm 10.2 with torch 2.15 on AMD's index, torch 2.15.0 and its companions on PyPI and
        GitHub, and (vllm_allows) a vLLM 0.34.0 whose wheel METADATA requires torch==2.15.0 (its JSON says
        2.14.0), whose sdist's CMakeLists.txt says TORCH_SUPPORTED_VERSION_ROCM `vllm_rocm_torch` and whose
        requirements/rocm.txt says `vllm_rocm_requires`."""
        if amd_ships:
            self.rocm("10.2.0", torch="2.15.0", triton="3.9.0+gitabcdef12", torchvision="0.30.0a0", torchaudio="2.12.0.1")
        self.pypi("torch", "2.15.0", ["triton==3.9.0", "filelock"], json_requires=["triton==3.8.0"])
        self.pypi("triton", "3.9.0", [])
        self.pypi("torchvision", "0.30.0", ["torch==2.15.0"])
        self.pypi("torchaudio", "2.12.0", ["torch==2.15.0"])
        self.archive("pytorch/pytorch/releases/download/v2.15.0/pytorch-v2.15.0.tar.gz", "torch 2.15.0")
        self.archive("pytorch/vision/archive/refs/tags/v0.30.0.tar.gz", "vision 0.30.0")
        self.archive("pytorch/audio/archive/refs/tags/v2.12.0.tar.gz", "audio 2.12.0")
        if vllm_allows:
            self.pypi("vllm", "0.34.0", ["torch==2.15.0", "torchaudio==2.12.0"],
                      json_requires=["torch==2.14.0"] if json_disagrees else None,
                      rocm_requires=list(vllm_rocm_requires), padding=70000, torch_rocm=vllm_rocm_torch)

    def aiter_release(self) -> None:
        """aiter v0.1.21: its setup.py pins flydsl 0.5.0 (on PyPI), its CK submodule moves to CK 1.4."""
        git("tag", "-a", "-m", "v0.1.21", "v0.1.21", self.commits["aiter-v0.1.21"], cwd=self.git_base / "ROCm" / "aiter")
        self.pypi("flydsl", "0.5.0", ["numpy>=1.26"])

    # ---- git ----

    def rev(self, name: str) -> str:
        """A commit of World.commits by name; NAME^{tree} is its tree."""
        commit, _, suffix = name.partition("^")
        if not suffix:
            return self.commits[commit]
        repo = next(path for path in self.git_base.glob("*/*") if self.commits[commit] in git("rev-list", "--all", cwd=path))
        return git("rev-parse", f"{self.commits[commit]}^{suffix}", cwd=repo)

    def _commit(self, repo: str, files: dict[str, str], gitlinks: dict[str, str] | None = None,
                tag: str | None = None) -> str:
        folder = self.git_base / repo
        if not folder.is_dir():
            folder.mkdir(parents=True)
            git("init", "-q", cwd=folder)
        for path, text in files.items():
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_text(text)
            git("add", path, cwd=folder)
        for path, commit in (gitlinks or {}).items():
            git("update-index", "--add", "--cacheinfo", f"160000,{commit},{path}", cwd=folder)
        git("commit", "-q", "--allow-empty", "-m", tag or "commit", cwd=folder)
        if tag:
            git("tag", "-a", "-m", tag, tag, cwd=folder)
        return git("rev-parse", "HEAD", cwd=folder)

    def _make_repositories(self) -> None:
        c = self.commits
        c["ck-1.3"] = self._commit("ROCm/composable_kernel", {"CMakeLists.txt": "set(version 1.3.0)\n"})
        c["ck-1.4"] = self._commit("ROCm/composable_kernel", {"CMakeLists.txt": "set(version 1.4.0)\n"})
        c["aiter-v0.1.11"] = self._commit("ROCm/aiter", {"setup.py": 'FLYDSL_VERSION = "flydsl==0.2.0"\n'}, tag="v0.1.11")
        c["aiter-v0.1.20.post1"] = self._commit("ROCm/aiter", {"setup.py": 'FLYDSL_VERSION = "flydsl==0.3.1"\n'},
                                                {"3rdparty/composable_kernel": c["ck-1.3"]}, tag="v0.1.20.post1")
        c["aiter-v0.1.21"] = self._commit("ROCm/aiter", {"setup.py": 'FLYDSL_VERSION = "flydsl==0.5.0"\n'},
                                          {"3rdparty/composable_kernel": c["ck-1.4"]})  # tagged by aiter_release()
        c["hipkittens"] = self._commit("HazyResearch/HipKittens", {"README.md": "HipKittens\n"})
        c["aotriton-0.13b"] = self._commit("ROCm/aotriton", {"third_party/aiter.txt": "v0.1.11\n"}, tag="0.13b")
        gfx908 = preimage((REPO / "patches" / "aotriton" / "0001-gfx908-experimental-target.patch").read_text())
        c["aotriton-0.14b"] = self._commit("ROCm/aotriton", {"third_party/aiter.txt": "v0.1.11\n", **gfx908}, tag="0.14b")
        c["llvm-a"] = self._commit("triton-lang/llvm-project", {"README": "llvm a\n"})
        c["llvm-b"] = self._commit("triton-lang/llvm-project", {"README": "llvm b\n"})
        # triton's cmake/llvm-info.json as it reads (triton-lang/triton 0d6ac4a9; checksums of the prebuilt LLVMs)
        for name, llvm in (("triton-3.8", "llvm-a"), ("triton-3.9", "llvm-b")):
            info = '{\n  "llvm_hash": "%s",\n  "build_number": 1,\n  "sha256sum": {\n    "almalinux-x64": "%s"\n  }\n}\n'
            c[name] = self._commit("triton-lang/triton", {"cmake/llvm-info.json": info % (c[llvm], "4" * 64)})
        c["rocm-triton-0.33"] = self._commit("ROCm/triton", {"README": "triton_kernels for vLLM 0.33\n"})
        c["rocm-triton-0.34"] = self._commit("ROCm/triton", {"README": "triton_kernels for vLLM 0.34\n"})
        for version, triton, aotriton in (("2.14.1", "triton-3.8", "0.13b"), ("2.15.0", "triton-3.9", "0.14b")):
            c[f"pytorch-v{version}"] = self._commit("pytorch/pytorch", {
                ".ci/docker/ci_commit_pins/triton.txt": c[triton] + "\n",
                "cmake/External/aotriton.cmake": f'  set(__AOTRITON_VER "{aotriton}")\n'
                                                 f'  set(__AOTRITON_CI_COMMIT "{c["aotriton-" + aotriton]}")\n'},
                tag=f"v{version}")
        flash_attn = preimage((REPO / "patches" / "flash-attn" / "0001-use-preinstalled-aiter-and-ck.patch").read_text())
        c["flash-attn-2.8.4"] = self._commit("Dao-AILab/flash-attention", flash_attn, {"csrc/composable_kernel": c["ck-1.3"]})
        c["flash-attn-v2.9.0"] = self._commit("Dao-AILab/flash-attention", {"setup.py": "# rewritten upstream\n"},
                                              {"csrc/composable_kernel": c["ck-1.4"]}, tag="v2.9.0")


# recipe -> {context key: the world's commit (a key of World.commits) that stands for the real pin}
WORLD_PINS = {"aiter": {"aiter_commit": "aiter-v0.1.20.post1", "ck_commit": "ck-1.3", "hipkittens_commit": "hipkittens"},
              "composable-kernel": {"ck_commit": "ck-1.3"},
              "flash-attn": {"flash_attn_commit": "flash-attn-2.8.4", "ck_commit": "ck-1.3"},
              "triton-rocm": {"triton_commit": "triton-3.8", "llvm_commit": "llvm-a"},
              "aotriton": {"aotriton_commit": "aotriton-0.13b", "aotriton_tree": "aotriton-0.13b^{tree}",
                           "aiter_commit": "aiter-v0.1.11"},
              "vllm": {"triton_kernels_commit": "rocm-triton-0.33"}}


# Architectures that stand for the table where a test plans every architecture twice over (a bump's proof): one of
# each PyTorch path (gfx906: source only), device family and capability set; test_bump_prove plans all of them.
REPRESENTATIVE_ARCHS = ("gfx906", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1151", "gfx1201")


def keep_only_archs(workspace: Path, archs: tuple[str, ...]) -> None:
    """The workspace's architecture table cut down to `archs` (rows and their variant files)."""
    table_file = workspace / "variants" / "architectures.yaml"
    table = yaml.safe_load(table_file.read_text())
    table["architectures"] = {name: row for name, row in table["architectures"].items() if name in archs}
    table_file.write_text(yaml.safe_dump(table, sort_keys=False))
    for variant in (workspace / "variants").glob("gfx*.yaml"):
        if variant.stem not in archs:
            variant.unlink()


def bump_workspace(world: World, target: Path, archs: tuple[str, ...] | None = None) -> Path:
    """The project's recipes, variants and patches (and LICENSE, which recipes package), as if upstream were
    the world: every address points at it (git sources at its repositories), every pinned commit is the
    world's commit that stands for it (in comments too, by its short form), every PyPI repack is a world
    file with its sha256, and the prebuilt lock reads the world's index. So `orchestrate fetch` of the
    workspace downloads and checks everything from the world."""
    for folder in ("recipes", "variants", "patches"):
        shutil.copytree(REPO / folder, target / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "LICENSE", target / "LICENSE")
    for recipe in (target / "recipes").glob("*/recipe.yaml"):
        text = recipe.read_text()
        context = (yaml.safe_load(text) or {}).get("context") or {}
        for key, world_key in WORLD_PINS.get(recipe.parent.name, {}).items():
            real, stand_in = str(context[key]), world.rev(world_key)
            text = text.replace(real, stand_in).replace(real[:8], stand_in[:8])
        text = re.sub(r"https://github\.com/([\w.-]+)/([\w-]+)\.git\b", lambda m: (world.git_base / m[1] / m[2]).as_uri(), text)
        text = text.replace("https://github.com/", f"{world.url}/github/")
        text = text.replace("https://pypi.org/packages/source/v/vllm/", f"{world.url}/files/")
        recipe.write_text(text)
    table = target / "variants" / "pypi.yaml"
    text = table.read_text()
    for entry in yaml.safe_load(text)["packages"].values():
        wheel = make_wheel(entry["pypi"], str(entry["version"]), [])
        world.files[f"/pythonhosted/{entry['file']}"] = wheel
        text = text.replace(entry["url"], f"{world.url}/pythonhosted/{entry['file']}").replace(entry["sha256"], sha256(wheel))
    table.write_text(text)
    for name in ("prebuilt.yaml", "prebuilt-lock.yaml"):
        path = target / "variants" / name
        path.write_text(path.read_text().replace("https://stable.repo.amd.com/rocm/whl-next/", world.amd_index))
    if archs:
        keep_only_archs(target, archs)
    return target


def stand_in_channel(workspace: Path, folder: Path) -> Path:
    """conda-forge as far as the workspace's plans need it: a repodata record (a solve reads nothing else)
    for every requirement no recipe of the workspace builds, at each version its requirements name and one
    past it, so every requirement of every architecture on both PyTorch paths has a record to solve with."""
    from rattler import MatchSpec

    from orchestrate import resolve
    from orchestrate.bump import prove
    from orchestrate.ui import Reporter

    plans, _ = prove.prove_plans(prove.prove_options(workspace, folder / "unused", []), None, Reporter(quiet=True))
    ours = {step.output.name for plan in plans for step in plan.steps}
    records: dict[str, dict] = {}
    for plan in plans:
        for env in resolve.environments([step.output for step in plan.steps]):
            for spec in env.specs + env.requirements:
                name = MatchSpec(spec).name.normalized if spec.strip() else ""
                if not name or name.startswith("__") or name in ours:
                    continue
                words = spec.split()
                build = words[2].replace("*", "0") if len(words) > 2 else "0"
                for number in re.findall(r"\d+(?:\.\d+)*", " ".join(words[1:2])) or ["1.0"]:
                    parts = number.split(".")
                    for version in (number, ".".join(parts[:-1] + [str(int(parts[-1]) + 1)]), "0.0.1"):
                        records[f"{name}-{version}-{build}.conda"] = {
                            "name": name, "version": version, "build": build, "build_number": 0, "depends": [],
                            "subdir": "linux-64"}
    for subdir, found in (("linux-64", records), ("noarch", {})):
        (folder / subdir).mkdir(parents=True, exist_ok=True)
        (folder / subdir / "repodata.json").write_text(json.dumps(
            {"info": {"subdir": subdir}, "packages": {}, "packages.conda": found, "repodata_version": 1}))
    return folder


def snapshot(workspace: Path) -> dict[str, str]:
    return {str(p.relative_to(workspace)): p.read_text() for folder in ("recipes", "variants")
            for p in sorted((workspace / folder).rglob("*")) if p.is_file() and "__pycache__" not in p.parts}


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
