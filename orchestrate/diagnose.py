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
import signal
from collections.abc import Sequence
from pathlib import Path

from .channels import (HTTP_STATUS, UNREACHABLE, as_rattler, channel_problem,
                       display_names, local_folder, name_of, users_channels)

from .errors import DISK_FULL_TEXT, disk_full_message, filesystem_of
from .options import GIB_PER_JOB

SOLVE_FAILED = "Failed to resolve dependencies"
RESOLVE_TIMEOUT_S = 60  # asking the channels again must not hold a failed build up for long
FETCH_FAILED = re.compile(r"^Failed to fetch from (\S+?):? (.*)$", re.M)
GIT_FAILED = re.compile(r"Git fetch failed: failed to fetch (\S+?):? (.*)", re.S)
CHECKSUM = re.compile(r"(sha256|md5) checksum validation failed for \"?[^\"\n]+\"?\s+expected:\s*(\w+)\s+actual:\s*(\w+)")
PATCH_APPLYING = re.compile(r"Applying patch:? (.+)")
MISSING_REV = re.compile(r"could not find a branch, tag, or commit named `([^`]+)` in `([^`]+)`")
NO_CANDIDATES = re.compile(r"No candidates were found for (.+?)\.?\s*$", re.M)
SCRIPT_STATUS = re.compile(r"Script failed with status (\d+)")
# What says a process was killed: gcc's driver, clang's, bash's job report ("line 16:  2986 Killed   cmd").
KILLED = re.compile(r"Killed signal terminated program (\S+)|unable to execute command: Killed|"
                    r"^\S+: line \d+: +\d+ Killed +(.+)$|\bsignal: 9\b|\(signal 9\)")
COMPILER_ERROR = re.compile(r"(?:^|: )(?:fatal )?error: |^CMake Error|^ERROR: ")
NO_LICENSE_FILES = "No license files were copied"  # rattler-build 0.73, when about.license_file matches nothing
LOW_SPACE_BYTES = 16 << 20  # a script that "failed to execute" with less free than this: the disk is full
LAST_LINES = 2  # of a failed script's output, when no line says `error:`
FIX_SOURCE = ("check the network or a proxy (HTTPS_PROXY), or run `orchestrate fetch` where it can be reached "
              "and share the source cache (--source-cache)")


def explain(error: str, log: Sequence[str], package: str = "", source_channels: Sequence[str] = (),
            max_jobs: int | None = None, work: Path | None = None, recipe: str = "the recipe") -> str:
    """The one-line cause of a failed build of `package`, from py-rattler-build's error and log.
    `max_jobs` is the MAX_JOBS the build had; `work` its work folder (whose disk a full disk names);
    `recipe` is where its sources are pinned."""
    log = [str(line) for line in log]
    text = "\n".join(log) + "\n" + error
    owner = f"{package}'s " if package else "a "
    if DISK_FULL_TEXT.search(text):
        return disk_full_message(work or Path.cwd(), "the build in")
    found = source_problem(text, owner, recipe)
    if found:
        return found
    if SOLVE_FAILED in error:
        return _solve_problem(log, package, source_channels)
    if "Test failed" in text or "test failed" in text.lower():
        # The test environment is solved too, and a channel that cannot be reached then fails "the tests".
        return _solve_problem(log, package, source_channels, channels_only=True) or "the recipe's tests failed"
    if NO_LICENSE_FILES in error:
        return (f"no license file was found for {package or 'the package'} (about.license_file matched nothing; a "
                "wheel's come from its dist-info): put the license text beside the recipe and name it in about.license_file "
                "(a PyPI-only package: `orchestrate pypi add NAME==VERSION --license-file FILE`)")
    found = script_problem(log, max_jobs)
    if found:
        return found
    if "Script failed" in error and work is not None and filesystem_of(work)[1] < LOW_SPACE_BYTES:
        # rattler-build could not even write the script: it says no more than this
        return disk_full_message(work, "the build in")
    return " ".join(error.replace("PyRattlerBuildError: ", "").split())[:300] or "the build failed"


def script_problem(log: Sequence[str], max_jobs: int | None = None) -> str | None:
    """Why the build script failed: killed by a signal (SIGKILL: the OOM killer), else its first compiler
    error, else the last lines it printed before it failed."""
    status_at = [i for i, line in enumerate(log) if SCRIPT_STATUS.search(line)]
    if not status_at:
        return None
    status = int(SCRIPT_STATUS.search(log[status_at[-1]]).group(1))
    # The script's own output: from its first traced command (rattler-build runs it with `set -x`) on.
    before = log[:status_at[-1]]
    start = next((i for i, line in enumerate(before) if line.startswith("+ ")), 0)
    output = [line for line in before[start:] if line.strip() and not line.startswith("+")]
    killed = next((KILLED.search(line) for line in reversed(output) if KILLED.search(line)), None)
    if status == 128 + signal.SIGKILL or killed:
        what = next((g for g in (killed.groups() if killed else ()) if g), "the build script")
        return f"{' '.join(what.split())[:120]} was killed (SIGKILL), most likely out of memory: {_fewer_jobs(max_jobs)}"
    if status > 128 and status - 128 < signal.NSIG:
        return f"the build script was killed by {signal.Signals(status - 128).name}"
    first_error = next((line.strip() for line in output if COMPILER_ERROR.search(line)), None)
    said = first_error or " | ".join(line.strip() for line in output[-LAST_LINES:]) or "no output"
    return f"the build script failed (exit status {status}): {said[:300]}"


def _fewer_jobs(max_jobs: int | None) -> str:
    assumed = f"the orchestrator assumed {GIB_PER_JOB} GiB per compile job"
    if not max_jobs:
        return f"build with fewer jobs (--jobs N; {assumed})"
    if max_jobs == 1:
        return f"MAX_JOBS was 1 already: free memory or add swap ({assumed})"
    return f"MAX_JOBS was {max_jobs}; try {max_jobs // 2} (--jobs {max_jobs // 2}; {assumed})"


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
        return (f"{kind} mismatch for {url}: expected {expected}, actual {actual}: fix the {kind} in {recipe} (or, for "
                f"AMD's artifacts, re-run `orchestrate pins --lock` and review variants/prebuilt-lock.yaml's diff) or the URL")
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
    names = display_names(source_channels)
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
    channel = channel_problem(problem, names)
    if channel:
        return channel
    missing = NO_CANDIDATES.search(problem)
    if missing:
        spec = missing.group(1).strip()
        spec = spec[:-2] if spec.endswith(" *") else spec
        searched = ", ".join(name_of(c, names) for c in users_channels(channels)) or "no channel"
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
    from rattler import BuildString, GenericVirtualPackage, PackageName, Version

    sources = [as_rattler(c) for c in channels if _still_there(c)]
    packages = []
    for item in virtual:
        name, _, rest = item.partition("=")
        version, _, build = rest.partition("=")
        try:
            packages.append(GenericVirtualPackage(PackageName(name), Version(version or "0"), BuildString(build or "0")))
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


def _still_there(channel: str) -> bool:
    """A folder channel that is gone (rattler-build's output folder goes with the work folder) is left out
    of the second solve; a channel name or URL is always asked (`conda-forge` is no folder: issue 13.4)."""
    folder = local_folder(channel)
    return folder is None or folder.is_dir()
