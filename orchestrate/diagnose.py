"""Why a build failed, in one line that names the cause and the fix.

py-rattler-build 0.73 raises terse errors: a solve that fails says only "Failed to resolve dependencies"
(whether a channel could not be reached or a package is in none of the channels), followed in the log
by "Retry attempt" lines. The log does name the channels and the specs of the environment it was
solving, so when a solve fails this module solves those specs again with py-rattler (the solver pixi
and rattler-build share), whose errors name the unreachable URL or the missing package.
"""
from __future__ import annotations

import asyncio
import datetime
import re
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

SOLVE_FAILED = "Failed to resolve dependencies"
RESOLVE_TIMEOUT_S = 60  # asking the channels again must not hold a failed build up for long
# Texts that mean "nothing answered" in reqwest's, curl's (git) and the resolver's own words.
UNREACHABLE = re.compile(
    r"error sending request|Request failed after \d+ retries|dns error|failed to lookup address|"
    r"Could not resolve host|Connection refused|couldn't connect|Failed to connect|timed out|"
    r"Name or service not known|No route to host|Network is unreachable|tcp connect error", re.I)
HTTP_STATUS = re.compile(r"HTTP status (?:client|server) error \((\d{3})[^)]*\)")
FETCH_FAILED = re.compile(r"^Failed to fetch from (\S+?):? (.*)$", re.M)
GIT_FAILED = re.compile(r"Git fetch failed: failed to fetch (\S+?):? (.*)", re.S)
CHECKSUM = re.compile(r"(sha256|md5) checksum validation failed for \"?[^\"\n]+\"?\s+expected:\s*(\w+)\s+actual:\s*(\w+)")
PATCH_APPLYING = re.compile(r"Applying patch:? (.+)")
MISSING_REV = re.compile(r"could not find a branch, tag, or commit named `([^`]+)` in `([^`]+)`")
URL_IN_ERROR = re.compile(r"for url \((\S+?)\)")
NO_CANDIDATES = re.compile(r"No candidates were found for (.+?)\.?\s*$", re.M)
MISSING_SUBDIR = re.compile(r"could not find subdir '([^']+)' in channel '([^']+)'")
FIX_CHANNEL = "check the network or a proxy, or set source_channels to a mirror in orchestrate.toml"
FIX_SOURCE = ("check the network or a proxy (HTTPS_PROXY), or run `orchestrate fetch` where it can be reached "
              "and share the source cache (--source-cache)")


def explain(error: str, log: Sequence[str], package: str = "", source_channels: Sequence[str] = (),
            recipe: str = "the recipe") -> str:
    """The one-line cause of a failed build of `package`, from py-rattler-build's error and log; `recipe`
    is where its sources are pinned."""
    log = [str(line) for line in log]
    text = "\n".join(log) + "\n" + error
    owner = f"{package}'s " if package else "a "
    found = source_problem(text, owner, recipe)
    if found:
        return found
    if SOLVE_FAILED in error:
        return _solve_problem(log, package, source_channels)
    if "Test failed" in text or "test failed" in text.lower():
        # The test environment is solved too, and a channel that cannot be reached then fails "the tests".
        return _solve_problem(log, package, source_channels, channels_only=True) or "the recipe's tests failed"
    return " ".join(error.replace("PyRattlerBuildError: ", "").split())[:300] or "the build failed"


def source_problem(text: str, owner: str = "", recipe: str = "the recipe") -> str | None:
    """A source that could not be fetched, verified or patched (`orchestrate fetch` uses it too)."""
    applying = PATCH_APPLYING.findall(text)
    if "Patch application error" in text or "error applying hunk" in text:
        patch = Path(applying[-1].strip()).name if applying else "a patch"
        reason, _, content = text.split("Patch application error:")[-1].partition("Hunk content:")
        header = re.search(r"^@@[^\n]*@@", content, re.M)
        hunk = " ".join(reason.split()) + (f" ({header.group(0)})" if header else "")
        target = f" to {owner}source" if owner else ""
        return f"patch {patch} does not apply{target}: {hunk}: rebase the patch on the pinned source"
    checksum = CHECKSUM.search(text)
    if checksum:
        kind, expected, actual = checksum.groups()
        fetched = FETCH_FAILED.findall(text)
        url = fetched[-1][0] if fetched else "the source"
        return f"{kind} mismatch for {url}: expected {expected}, actual {actual}: fix the {kind} in {recipe} or the URL"
    missing = MISSING_REV.search(text)
    if missing:
        return f"commit {missing.group(1)} not found in {missing.group(2)}: fix the rev in {recipe}"
    git = GIT_FAILED.search(text)
    if git:
        url, reason = git.group(1), " ".join(git.group(2).split())
        if UNREACHABLE.search(reason):
            return f"{owner}git source {url} cannot be reached: {FIX_SOURCE}"
        if re.search(r"not found|does not exist|returned error: 404", reason, re.I):
            return f"{owner}git source {url} does not exist: fix the git URL in the recipe"
        return f"{owner}git source {url} could not be fetched ({reason[:200]})"
    failed = FETCH_FAILED.findall(text)
    if not failed:
        return None
    url, reason = failed[-1]
    status = HTTP_STATUS.search(reason)
    if status and status.group(1) == "404":
        return f"{owner}source {url} is not there (HTTP 404): fix the URL in the recipe"
    if status:
        return f"{owner}source {url} answered HTTP {status.group(1)}: check the URL, or try again later"
    if UNREACHABLE.search(reason):
        return f"{owner}source {url} cannot be reached: {FIX_SOURCE}"
    return None


def _solve_problem(log: list[str], package: str, source_channels: Sequence[str], channels_only: bool = False
                   ) -> str | None:
    """Why the last environment in the log could not be solved; with `channels_only`, only a channel
    that cannot be reached or is no channel counts (the solve may have worked and something else failed)."""
    channels, specs, platform, virtual = _last_solve_request(log)
    names = _channel_names(source_channels)
    what = f"{package}'s requirements" if package else "the requirements"
    if channels_only and _last_request_solved(log):
        return None
    if not specs:
        return None if channels_only else f"{what} could not be resolved: see the log"
    problem = _resolve_again(channels, specs, platform, virtual)
    if channels_only and (problem is None or NO_CANDIDATES.search(problem) or "Cannot solve" in problem):
        return None
    if problem is None:
        flaky = any(line.startswith("Retry attempt") for line in log)
        cause = "a channel did not answer in time" if flaky else "the channels answered when asked again"
        return f"{what} could not be resolved ({cause}): run the same command again"
    subdir = MISSING_SUBDIR.search(problem)
    if subdir:
        name = _name_of(subdir.group(2), names)
        return (f"{name} is not a conda channel (no {subdir.group(1)}/repodata.json at {subdir.group(2)}): "
                "fix source_channels in orchestrate.toml")
    if UNREACHABLE.search(problem):
        url = URL_IN_ERROR.search(problem)
        name = _name_of(_channel_of(url.group(1), channels) if url else "", names) if url else "a channel"
        return f"{name} cannot be reached: {FIX_CHANNEL}"
    status = HTTP_STATUS.search(problem)
    if status:
        url = URL_IN_ERROR.search(problem)
        name = _name_of(_channel_of(url.group(1), channels), names) if url else "a channel"
        return f"{name} answered HTTP {status.group(1)}: check its URL (and credentials) in source_channels"
    missing = NO_CANDIDATES.search(problem)
    if missing:
        spec = missing.group(1).strip()
        spec = spec[:-2] if spec.endswith(" *") else spec
        searched = ", ".join(_name_of(c, names) for c in _users_channels(channels)) or "no channel"
        return (f"{spec} (needed by {package or 'this package'}) is in none of the channels ({searched}): "
                "add a channel that has it to source_channels in orchestrate.toml, or fix the requirement")
    first = " ".join(problem.replace("Cannot solve the request because of:", "").split())
    return f"{what} cannot be satisfied together: {first[:300]}"


def _last_solve_request(log: list[str]) -> tuple[list[str], list[str], str, list[str]]:
    """Channels, specs, platform and virtual packages of the last environment rattler-build solved."""
    channels: list[str] = []
    specs: list[str] = []
    platform, virtual = "", []
    section = None
    for raw in log:
        line = raw.strip()
        if line.startswith("Platform:"):
            match = re.match(r"Platform:\s*(\S+)(?:\s*\[(.*)\])?", line)
            platform = match.group(1)
            virtual = [v.strip() for v in (match.group(2) or "").split(",") if v.strip()]
            channels, specs, section = [], [], None
        elif line == "Channels:":
            section = channels
        elif line == "Specs:":
            section = specs
        elif line.startswith("- ") and section is not None:
            section.append(line[2:].strip())
        else:
            section = None
    return channels, specs, platform, virtual


def _last_request_solved(log: list[str]) -> bool:
    """Whether rattler-build got past the last solve in the log (it prints the solution as a table)."""
    starts = [i for i, line in enumerate(log) if line.strip() == "Specs:"]
    after = log[starts[-1]:] if starts else []
    return any("Successfully updated" in line or "┆" in line for line in after)


def _resolve_again(channels: list[str], specs: list[str], platform: str, virtual: list[str]) -> str | None:
    """py-rattler's own error for the same request, or None when it solves now."""
    import rattler
    from rattler import GenericVirtualPackage, PackageName, Version

    sources = [rattler.Channel(c) for c in channels if not _is_missing_folder(c)]
    packages = []
    for item in virtual:
        name, _, rest = item.partition("=")
        version, _, build = rest.partition("=")
        try:
            packages.append(GenericVirtualPackage(PackageName(name), Version(version or "0"), build or "0"))
        except Exception:  # an entry py-rattler cannot parse would only make the answer less precise
            continue
    platforms = [platform, "noarch"] if platform and platform != "noarch" else ["noarch"]

    async def solve():
        await rattler.solve(sources=sources, specs=specs, platforms=platforms, virtual_packages=packages,
                            timeout=datetime.timedelta(seconds=RESOLVE_TIMEOUT_S))

    try:
        asyncio.run(asyncio.wait_for(solve(), RESOLVE_TIMEOUT_S))
    except asyncio.TimeoutError:
        return None
    except Exception as exc:  # GatewayError, SolverError, ...: their text is the answer
        return str(exc)
    return None


def _channel_names(source_channels: Sequence[str]) -> dict[str, str]:
    """Each source channel's base URL -> what the user wrote (`conda-forge` for its full URL)."""
    import rattler

    names = {}
    for name in source_channels:
        try:
            names[_norm(rattler.Channel(str(name)).base_url)] = str(name)
        except Exception:
            names[_norm(str(name))] = str(name)
    return names


def _channel_of(url: str, channels: list[str]) -> str:
    """The listed channel a failing request URL belongs to (the longest matching prefix)."""
    matches = [c for c in channels if url.startswith(_norm(c))]
    return max(matches, key=len) if matches else url


def _name_of(channel: str, names: dict[str, str]) -> str:
    return names.get(_norm(channel), _norm(channel))


def _norm(url: str) -> str:
    return url.rstrip("/")


def _local_path(channel: str) -> Path | None:
    parsed = urlparse(channel)
    if parsed.scheme == "file":
        return Path(parsed.path)
    return Path(channel) if not parsed.scheme else None


def _is_missing_folder(channel: str) -> bool:
    path = _local_path(channel)
    return path is not None and not path.is_dir()


def _users_channels(channels: list[str]) -> list[str]:
    """The channels a user chose: rattler-build lists its own output folder first."""
    return channels[1:] if channels and _local_path(channels[0]) is not None else channels
