"""Upstream sources on this machine for the source-cache tests: an HTTP server on 127.0.0.1 that counts the
requests for each file, a local git repository, and a recipe in the test workspace that uses both."""
from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
           "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1", "PATH": "/usr/bin:/bin"}


class CountingServer:
    """Serves a folder on 127.0.0.1 from a child process (py-rattler-build holds the GIL while it builds,
    so a server thread in the test process would never answer); `downloads[name]` counts the GET requests
    for each file."""

    SCRIPT = """
import sys
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
root, log_path = sys.argv[1], sys.argv[2]
class Handler(SimpleHTTPRequestHandler):
    def do_GET(self):
        with open(log_path, "a") as log:
            log.write(self.path.lstrip("/") + "\\n")
        return super().do_GET()
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=root))
print(server.server_address[1], flush=True)
server.serve_forever()
"""

    def __init__(self, root: Path):
        self.root = root
        self.log = root.parent / f"{root.name}-requests.log"
        self.log.write_text("")

    @property
    def downloads(self) -> Counter:
        return Counter(self.log.read_text().split())

    def __enter__(self) -> "CountingServer":
        self.process = subprocess.Popen([sys.executable, "-c", self.SCRIPT, str(self.root), str(self.log)],
                                        stdout=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{self.process.stdout.readline().strip()}"
        return self

    def __exit__(self, *exc) -> None:
        self.process.kill()
        self.process.wait()


def make_tarball(folder: Path, name: str, files: dict[str, str | bytes]) -> str:
    """Writes folder/name (a .tar.gz of `files` under one top folder); returns its sha256."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path, text in files.items():
            data = text.encode() if isinstance(text, str) else text
            info = tarfile.TarInfo(f"upstream-1.0/{path}")
            info.size, info.mtime = len(data), 0
            tar.addfile(info, io.BytesIO(data))
    (folder / name).write_bytes(buffer.getvalue())
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def make_git_repo(folder: Path, files: dict[str, str]) -> str:
    """A local git repository with one commit of `files`; returns the full commit id."""
    folder.mkdir(parents=True)
    for path, text in files.items():
        (folder / path).write_text(text)
    for command in (["init", "-q"], ["add", "."], ["commit", "-qm", "upstream"]):
        subprocess.run(["git", *command], cwd=folder, check=True, env=GIT_ENV)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=folder, check=True, env=GIT_ENV, capture_output=True,
                          text=True).stdout.strip()


PATCH = """Why: the test recipe's patch, checked by fetch and applied by builds.
Upstream: none. Applies to: upstream 1.0.
--- a/kernels.txt
+++ b/kernels.txt
@@ -1 +1 @@
-upstream kernels
+patched kernels
"""

RECIPE = """package:
  name: sourced
  version: "1.0"
source:
  - url: {url}/upstream-1.0.tar.gz
    sha256: "{sha256}"
    patches:
      - ../../patches/sourced/0001-patch-kernels.patch
  - git: {git}
    rev: "{commit}"
    target_directory: tools
build:
  string: ${{{{ gpu_arch }}}}_h${{{{ hash }}}}_${{{{ build_number }}}}
  script:
    - mkdir -p $PREFIX/share/sourced
    - cp kernels.txt tools/tool.txt $PREFIX/share/sourced/
requirements:
  run_constraints:
    - __amdgpu_arch ==${{{{ amdgpu_isa }}}}
extra:
  estimate: {{build_minutes: 90, disk_gib: {disk_gib}, source_gib: {source_gib}}}
"""


@contextmanager
def sourced_recipe(workspace: Path, tmp_path: Path, disk_gib: float = 0.001, payload_mib: int = 0,
                   source_gib: float = 0.001):
    """Adds recipes/sourced (a url tarball with a patch, plus a git checkout) to the workspace; yields the
    counting server and the git repository. `payload_mib` pads the tarball with incompressible bytes."""
    root = tmp_path / "upstream"
    root.mkdir()
    files: dict[str, str | bytes] = {"kernels.txt": "upstream kernels\n"}
    if payload_mib:
        files["payload.bin"] = os.urandom(payload_mib * 2**20)
    sha256 = make_tarball(root, "upstream-1.0.tar.gz", files)
    repo = tmp_path / "tools-repo"
    commit = make_git_repo(repo, {"tool.txt": "tool 1.0\n"})
    (workspace / "patches/sourced").mkdir(parents=True)
    (workspace / "patches/sourced/0001-patch-kernels.patch").write_text(PATCH)
    with CountingServer(root) as server:
        (workspace / "recipes/sourced").mkdir()
        (workspace / "recipes/sourced/recipe.yaml").write_text(
            RECIPE.format(url=server.url, sha256=sha256, git=repo.as_uri(), commit=commit, disk_gib=disk_gib,
                          source_gib=source_gib))
        server.repo, server.commit, server.sha256 = repo, commit, sha256
        yield server
