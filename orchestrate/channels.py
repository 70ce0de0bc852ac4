"""What a channel string means, decided once, the way rattler (and so rattler-build and pixi) decides it.

Users write channels as names (`conda-forge`, `bioconda`, `my-org/label`: a name under the channel alias
https://conda.anaconda.org/), as URLs (`https://…`, `s3://…`, `file://…`) or as folders (`/srv/channel`,
`./channel`, `../x`, `~/channel`). rattler's channel config tells them apart: a string with a scheme is a
URL; one that starts like a path (`/`, `./`, `..`, `~/`) is a folder; anything else is a name. Asking
rattler itself (rattler.Channel) keeps this module and every solve in agreement; guessing from "has no
URL scheme" once took `conda-forge` for a missing folder (issue 13.4).
"""
from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from urllib.parse import unquote, urlparse

FIX_CHANNEL = "check the network or a proxy, or set source_channels to a mirror in orchestrate.toml"
FIX_SOURCE_CHANNELS = "fix source_channels in orchestrate.toml"
# Texts that mean "nothing answered" in reqwest's, curl's (git) and the resolver's own words.
UNREACHABLE = re.compile(
    r"error sending request|Request failed after \d+ retries|dns error|failed to lookup address|"
    r"Could not resolve host|Connection refused|couldn't connect|Failed to connect|timed out|"
    r"Name or service not known|No route to host|Network is unreachable|tcp connect error", re.I)
HTTP_STATUS = re.compile(r"HTTP status (?:client|server) error \((\d{3})[^)]*\)")
URL_IN_ERROR = re.compile(r"for url \((\S+?)\)")
MISSING_SUBDIR = re.compile(r"could not find subdir '([^']+)' in channel '([^']+)'")


def local_folder(channel: str) -> Path | None:
    """The folder a channel string names, or None when it is a channel name or a remote URL."""
    url = base_url(channel)
    if not url.startswith("file://"):
        return None
    return Path(unquote(urlparse(url).path))


def anchored(channel: str, folder: Path) -> str:
    """A relative folder channel (`./mirror`, `../x`) as an absolute path from `folder`; anything else as
    written. orchestrate.toml's channels are relative to the workspace, not to where orchestrate runs."""
    text = str(channel)
    if local_folder(text) is None or "://" in text or text.startswith(("/", "~")):
        return text
    return str((folder / text).resolve())


def as_rattler(channel: str):
    """The rattler.Channel a string names. root_dir is given each time: py-rattler's default is the working
    directory at the time rattler was imported, not the current one."""
    import rattler

    return rattler.Channel(str(channel), rattler.ChannelConfig(root_dir=os.getcwd()))


def base_url(channel: str) -> str:
    """The channel's URL without a trailing slash (`conda-forge` -> https://conda.anaconda.org/conda-forge).
    A string rattler cannot read as a channel is returned as written: the solve then says what is wrong."""
    try:
        return str(as_rattler(channel).base_url).rstrip("/")
    except Exception:  # rattler's ParseChannelError and friends
        return str(channel).rstrip("/")


def display_names(channels: Iterable[str]) -> dict[str, str]:
    """Each channel's base URL -> what the user wrote (`conda-forge` for its full URL)."""
    return {base_url(c): str(c) for c in channels}


def name_of(channel_or_url: str, names: dict[str, str]) -> str:
    """What the user wrote for a channel (or for a URL inside it); the URL when the user wrote none."""
    url = base_url(channel_or_url) if "://" not in channel_or_url else channel_or_url.rstrip("/")
    owners = [u for u in names if url == u or url.startswith(u + "/")]
    return names[max(owners, key=len)] if owners else url


def channel_problem(error: str, names: dict[str, str]) -> str | None:
    """One line for a channel-level failure in a py-rattler error (unreachable, not a channel, an HTTP
    error), naming the channel as the user wrote it; None when the error is about packages."""
    subdir = MISSING_SUBDIR.search(error)
    if subdir:
        return (f"{name_of(subdir.group(2), names)} is not a conda channel (no {subdir.group(1)}/repodata.json "
                f"at {subdir.group(2)}): {FIX_SOURCE_CHANNELS}")
    url = URL_IN_ERROR.search(error)
    name = name_of(url.group(1), names) if url else "a channel"
    if UNREACHABLE.search(error):
        return f"{name} cannot be reached: {FIX_CHANNEL}"
    status = HTTP_STATUS.search(error)
    if status:
        return f"{name} answered HTTP {status.group(1)}: check its URL (and credentials) in source_channels"
    return None


def users_channels(channels: Sequence[str]) -> list[str]:
    """The channels a user chose, from a rattler-build log that lists its own output folder first."""
    return list(channels[1:]) if channels and local_folder(channels[0]) is not None else list(channels)
