"""Reading what an upstream release says about itself, from its own files: PyPI's list of releases, a wheel's
METADATA (the PEP 658 `.metadata` file where the index serves one, else HTTP range requests on the wheel's
zip directory), an sdist's files, a repository's tags and files at a tag (raw-file URLs, or `git` against
--git-base) and AMD's index. Never the JSON API's `requires_dist` where a release has files to read: it is
one answer per release and has been wrong (vLLM 0.33.0). `orchestrate pins` and `pins --bump` both read
upstream through this one reader.

Every address can be pointed elsewhere (a test points them all at 127.0.0.1): `World` holds them. Every
answer says where it was read (`Read.source`), and every failure is a `ReadError` that says what could
not be read and whether the upstream did not answer at all.
"""
from __future__ import annotations

import email.parser
import hashlib
import io
import os
import re
import subprocess
import tarfile
import tempfile
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from . import package_index, web
from .upstreams import parse_version

RAW_BASE_ENV = "ORCHESTRATE_RAW_BASE"
DEFAULT_RAW_BASE = "https://raw.githubusercontent.com"
GIT_UNREACHABLE = ("could not resolve host", "failed to connect", "connection refused", "connection timed out",
                   "timed out", "network is unreachable", "could not connect", "unable to access")


class ReadError(Exception):
    """What could not be read, as a row says it; `unreachable`: the upstream did not answer at all."""

    def __init__(self, message: str, unreachable: bool = False):
        super().__init__(message)
        self.unreachable = unreachable


@dataclass(frozen=True)
class Read:
    value: object
    source: str  # where it was read, as a row names it
    file: str = ""  # the release file it was read from, where it was one


@dataclass
class World:
    """Where each upstream is: PyPI's JSON API, git repositories (a URL or a folder of OWNER/REPO), files at
    a git ref (raw URLs; None: through git), AMD's index."""

    pypi_url: str
    git_base: str
    raw_base: str | None
    amd_index: str
    timeout: float
    cache: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="orchestrate-bump-")))
    _json: dict = field(default_factory=dict)
    _tags: dict = field(default_factory=dict)
    _amd: dict = field(default_factory=dict)
    _sdists: dict = field(default_factory=dict)  # url -> bytes: a release's sdist is read for several facts

    # ---- PyPI ----

    def project(self, name: str) -> dict:
        """PyPI's JSON document of a project (the list of releases and files; not their requirements)."""
        url = f"{self.pypi_url}/{name}/json"
        return _remembered(self._json, name, url, lambda: web.get_json(url, self.timeout))

    def releases(self, name: str, include_pre: bool = False) -> list[tuple[Version, str]]:
        """(version, label) of every release with a file that is not yanked, oldest first."""
        found = []
        for label, files in (self.project(name).get("releases") or {}).items():
            version = parse_version(label)
            if version is None or not files or all(f.get("yanked") for f in files):
                continue
            if include_pre or not (version.is_prerelease or version.is_devrelease):
                found.append((version, label))
        return sorted(found)

    def files(self, name: str, label: str) -> list[dict]:
        json_url = f"{self.pypi_url}/{name}/json"
        return [{**f, "url": urllib.parse.urljoin(json_url, str(f.get("url", "")))}
                for f in (self.project(name).get("releases") or {}).get(label) or [] if not f.get("yanked")]

    def requirements(self, name: str, label: str) -> Read:
        """Requires-Dist of a release, from a Linux x86_64 wheel's METADATA (else any wheel's, else the
        sdist's PKG-INFO), with the file and the way it was read as the source."""
        found = self.wheel_requirements(name, label)
        if found is not None:
            return found
        files = self.files(name, label)
        sdists = [f for f in files if str(f.get("filename", "")).endswith((".tar.gz", ".zip"))]
        if sdists:
            members = self.sdist_members(sdists[0]["url"], re.compile(r"^[^/]+/PKG-INFO$"))
            if members:
                return Read(_requires_dist(next(iter(members.values()))), f"{sdists[0]['filename']} PKG-INFO",
                            sdists[0]["filename"])
        raise ReadError(f"{name} {label} has no wheel or sdist on {self.pypi_url} to read its requirements from")

    def wheel_requirements(self, name: str, label: str) -> Read | None:
        """Requires-Dist of a release from a Linux x86_64 wheel's METADATA, else any wheel's; None where the
        release has no wheel."""
        found = self.wheel_metadata(name, label)
        return None if found is None else Read(_requires_dist(found.value), found.source, found.file)

    def wheel_metadata(self, name: str, label: str, filename: str | None = None) -> Read | None:
        """The METADATA text of a release's wheel: the one named `filename`, else a Linux x86_64 wheel, else any;
        None where the release has no such wheel. Read from the PEP 658 file where the index lists one and
        serves it, else by range requests on the wheel (a mirror may list a `.metadata` file it does not serve)."""
        files = self.files(name, label)
        wheels = [f for f in files if str(f.get("filename", "")).endswith(".whl")
                  and (filename is None or f.get("filename") == filename)]
        wheels.sort(key=lambda f: ("x86_64" not in f["filename"] or "linux" not in f["filename"], f["filename"]))
        if not wheels:
            return None
        wheel = wheels[0]
        try:
            text, how = None, "METADATA (range read)"
            if wheel.get("core-metadata") or wheel.get("data-dist-info-metadata"):
                try:
                    text = package_index.checked_metadata(self.download(wheel["url"] + ".metadata"), wheel["filename"])
                    how = "METADATA (PEP 658)"
                except ReadError as exc:
                    if exc.unreachable:
                        raise
            if text is None:
                text = package_index.remote_wheel_metadata(wheel["url"], self.timeout)
        except web.Unreachable as exc:
            raise ReadError(f"cannot reach {wheel['url']} ({exc})", unreachable=True) from None
        except LookupError as exc:
            raise ReadError(str(exc)) from None
        return Read(text, f"{wheel['filename']} {how}", wheel["filename"])

    def sdist_requirements(self, name: str, label: str, files: re.Pattern) -> list[Read]:
        """Requirement lines of the sdist's requirement files whose path (inside the sdist's folder) matches:
        what a build from the sdist installs (vLLM's requirements/rocm.txt), which its wheel METADATA lacks."""
        sdist = self._sdist(name, label)
        members = self.sdist_members(sdist["url"], re.compile(r"^[^/]+/(" + files.pattern + r")$"), web.listed_size(sdist))
        found = []
        for path, text in sorted(members.items()):
            lines = [line.split("#", 1)[0].strip() for line in text.splitlines()]
            found.append(Read([line for line in lines if line and not line.startswith("-")],
                              f"{sdist['filename']} {path.split('/', 1)[1]}"))
        return found

    def sdist_file(self, name: str, label: str, path: str) -> Read:
        """The text of one file of a release's PyPI sdist (path relative to the sdist's top folder)."""
        sdist = self._sdist(name, label)
        members = self.sdist_members(sdist["url"], re.compile(r"^[^/]+/" + re.escape(path) + "$"), web.listed_size(sdist))
        source = f"{sdist['filename']} {path}"
        if not members:
            raise ReadError(f"{source} does not exist")
        return Read(next(iter(members.values())), source, sdist["filename"])

    def _sdist(self, name: str, label: str) -> dict:
        """PyPI's entry for the release's sdist."""
        sdists = [f for f in self.files(name, label) if str(f.get("filename", "")).endswith(".tar.gz")]
        if not sdists:
            raise ReadError(f"{name} {label} has no sdist on {self.pypi_url}")
        return sdists[0]

    def sdist_members(self, url: str, pattern: re.Pattern, limit: int = web.MAX_BODY) -> dict[str, str]:
        """The text of the sdist's files whose path matches (downloaded whole, at most `limit` bytes, the size PyPI
        lists: a tarball has no directory)."""
        if url not in self._sdists:
            self._sdists[url] = self.download(url, limit)
        body = self._sdists[url]
        try:
            with tarfile.open(fileobj=io.BytesIO(body), mode="r:*") as archive:
                return {m.name: archive.extractfile(m).read().decode("utf-8", "replace")
                        for m in archive.getmembers() if m.isfile() and pattern.match(m.name)}
        except tarfile.TarError as exc:
            raise ReadError(f"{url} is not a readable sdist ({exc})") from None

    def sha256_of(self, url: str) -> str:
        """The sha256 of a download, streamed."""
        digest = hashlib.sha256()
        try:
            with web.opened(url, self.timeout) as response:
                for chunk in iter(lambda: response.read(1 << 20), b""):
                    digest.update(chunk)
        except web.Unreachable as exc:
            raise ReadError(f"cannot download {url} ({exc})", unreachable=True) from None
        except LookupError as exc:
            raise ReadError(f"cannot download {url} ({exc})") from None
        return digest.hexdigest()

    def download(self, url: str, limit: int = web.MAX_BODY) -> bytes:
        try:
            return web.get(url, self.timeout, accept="*/*", limit=limit).body
        except web.Unreachable as exc:
            raise ReadError(f"cannot reach {url} ({exc})", unreachable=True) from None
        except LookupError as exc:
            raise ReadError(f"cannot read {url} ({exc})") from None

    # ---- git ----

    def repo_url(self, repo: str) -> str:
        return f"{self.git_base}/{repo}"

    def tags(self, repo: str) -> dict[str, str]:
        """tag -> commit (annotated tags peeled) of a repository, by `git ls-remote`."""
        if repo not in self._tags:
            try:
                output = self._git("ls-remote", "--tags", self.repo_url(repo), seconds=self.timeout)
            except ReadError as exc:
                self._tags[repo] = exc
            else:
                commits: dict[str, str] = {}
                for line in output.splitlines():
                    commit, _, ref = line.partition("\t")
                    name = ref.removeprefix("refs/tags/")
                    if name.endswith("^{}"):
                        commits[name[:-3]] = commit
                    elif ref.startswith("refs/tags/"):
                        commits.setdefault(name, commit)
                self._tags[repo] = commits
        found = self._tags[repo]
        if isinstance(found, ReadError):
            raise found
        return found

    def tag_commit(self, repo: str, tag: str) -> Read:
        commit = self.tags(repo).get(tag)
        if not commit:
            raise ReadError(f"{self.repo_url(repo)} has no tag {tag}")
        return Read(commit, f"{repo} tag {tag}")

    def file_at(self, repo: str, ref: str, path: str) -> Read:
        """A file's text at a tag or commit: a raw-file URL where one is configured, else `git show`."""
        source = f"{repo} {path} at {ref[:12] if re.fullmatch(r'[0-9a-f]{40}', ref) else ref}"
        if self.raw_base:
            return Read(self.download(f"{self.raw_base}/{repo}/{ref}/{path}").decode("utf-8", "replace"), source)
        checkout = self.fetched(repo, ref)
        return Read(self._git("show", f"{ref}:{path}", cwd=checkout), source)

    def gitlink(self, repo: str, commit: str, path: str) -> Read:
        """The commit a submodule path points at, in a commit of a repository."""
        line = self._git("ls-tree", commit, path, cwd=self.fetched(repo, commit)).strip()
        parts = line.split()
        if len(parts) < 3 or parts[1] != "commit":
            raise ReadError(f"{repo} at {commit[:12]} has no submodule {path}")
        return Read(parts[2], f"{repo} gitlink {path} at {commit[:12]}")

    def tree(self, repo: str, commit: str) -> str:
        return self._git("rev-parse", f"{commit}^{{tree}}", cwd=self.fetched(repo, commit)).strip()

    def checkout(self, repo: str, commit: str) -> Path:
        """A work tree of the repository at a commit (for checking that our patches still apply)."""
        folder = self.cache / "checkouts" / f"{repo.replace('/', '+')}-{commit[:12]}"
        if not folder.is_dir():
            self._git("worktree", "add", "--detach", str(folder), commit, cwd=self.fetched(repo, commit))
        return folder

    def fetched(self, repo: str, ref: str) -> Path:
        """A local repository holding `ref` of the upstream repository (a shallow fetch, else a full one)."""
        local = self.cache / "git" / repo.replace("/", "+")
        if not local.is_dir():
            local.mkdir(parents=True)
            self._git("init", "-q", cwd=local)
        if subprocess.run(["git", "cat-file", "-e", f"{ref}^{{commit}}"], cwd=local, capture_output=True).returncode:
            known = self._tags.get(repo)
            wanted = f"refs/tags/{ref}:refs/tags/{ref}" if isinstance(known, dict) and ref in known else ref
            try:
                self._git("fetch", "-q", "--depth", "1", self.repo_url(repo), wanted, cwd=local)
            except ReadError as exc:
                if exc.unreachable:
                    raise
                self._git("fetch", "-q", "--tags", self.repo_url(repo), "+refs/heads/*:refs/remotes/origin/*", cwd=local)
        return local

    def _git(self, *args: str, cwd: Path | None = None, seconds: float | None = None) -> str:
        """`git ARGS`; `seconds` it may take (default: six lookups' time, for the fetches of a whole tag)."""
        seconds = seconds or self.timeout * 6
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true"}
        try:
            result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=seconds,
                                    env=env)
        except subprocess.TimeoutExpired:
            raise ReadError(f"git {args[0]} {args[-1]}: no answer in {seconds:g} s", unreachable=True) from None
        except FileNotFoundError:
            raise ReadError("git is not installed: install git to read upstream repositories") from None
        if result.returncode != 0:
            message = next((line for line in result.stderr.splitlines() if line.strip()), "failed").removeprefix("fatal: ")
            unreachable = any(word in message.lower() for word in GIT_UNREACHABLE)
            where = next((a for a in args if "://" in a or a.startswith("/")), args[-1])
            raise ReadError(f"cannot reach {where} ({message.strip()})" if unreachable
                            else f"git {args[0]} {where}: {message.strip()}", unreachable)
        return result.stdout

    # ---- AMD's index ----

    def amd_files(self, project: str) -> list[package_index.IndexFile]:
        return _remembered(self._amd, project, self.amd_index,
                           lambda: package_index.read_project(self.amd_index, project, self.timeout) or [])

    def amd_versions(self, project: str) -> list[Version]:
        return package_index.versions_of(self.amd_files(project), project)


def _remembered(table: dict, key: str, where: str, read):
    """read() once per key; a failure is remembered too, so one run asks an upstream that failed only once."""
    if key not in table:
        try:
            table[key] = read()
        except web.Unreachable as exc:
            table[key] = ReadError(f"cannot reach {where} ({exc})", unreachable=True)
        except LookupError as exc:
            table[key] = ReadError(str(exc))
    if isinstance(table[key], ReadError):
        raise table[key]
    return table[key]


def _requires_dist(text: str) -> list[str]:
    return email.parser.Parser().parsestr(text, headersonly=True).get_all("Requires-Dist") or []


def requirements_on(requires_dist: list[str], project: str) -> list[Requirement]:
    """The requirements a Requires-Dist list puts on one project; an extra's are dropped (nothing installs an
    extra unless asked), and a line that does not parse names nothing."""
    found = []
    for line in requires_dist:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if canonicalize_name(requirement.name) != canonicalize_name(project):
            continue
        if requirement.marker is not None and "extra" in str(requirement.marker):
            continue
        found.append(requirement)
    return found
