"""What upstream text may be written into a recipe, a variant file or the lock (issue 37, a13/a20), checked once.

A tag, a version or a URL read from upstream is data; written into a recipe it becomes template text (a tag
`${{ env.get("AWS_SECRET_ACCESS_KEY") }}` is a valid git ref, and the render would put the secret in the package).
So a value is written only when it matches its own grammar, whatever pattern or page found it: `pins --bump
--write`, `pypi add` and `pins --lock` all write through here.
"""
from __future__ import annotations

import re
import urllib.parse

from packaging.version import InvalidVersion, Version

from .errors import UserError

SHA256_TEXT, COMMIT_TEXT = re.compile(r"[0-9a-f]{64}"), re.compile(r"[0-9a-f]{40}")
VERSION_TEXT = re.compile(r"[0-9A-Za-z][0-9A-Za-z.+!_-]{0,63}")  # PEP 440's characters, and no more
TAG_TEXT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}")  # a tag a declared pattern matches, in these characters
FILE_TEXT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,254}")  # a wheel's or an sdist's file name
URL_PATH_TEXT = re.compile(r"/[A-Za-z0-9._~%+@/-]*")


class NotGrammar(UserError):
    """Upstream text refused before it is written: the message names the value and where it came from."""


def _refused(value: object, source: str, wanted: str) -> NotGrammar:
    shown = repr(str(value))
    return NotGrammar(f"{source} gave {shown[:100] + ('…' if len(shown) > 100 else '')}, which is not {wanted}: "
                      "refused, nothing written (check that upstream; write the pin by hand if it is right)")


def checked_pin(value: object, source: str, tags: "list[re.Pattern]" = ()) -> str:
    """`value` when it is a sha256, a full commit, a PEP 440 version or a tag one of `tags` (the patterns declared in
    variants/upstreams.yaml) matches, in the characters each may hold; else NotGrammar."""
    text = str(value)
    if SHA256_TEXT.fullmatch(text) or COMMIT_TEXT.fullmatch(text):
        return text
    if VERSION_TEXT.fullmatch(text) and _is_version(text):
        return text
    if TAG_TEXT.fullmatch(text) and ".." not in text and any(t.fullmatch(text) for t in tags):
        return text
    raise _refused(text, source, "a version, a tag of a declared pattern, a full commit or a sha256")


def checked_url(value: object, source: str, allowed: "list[str]") -> str:
    """`value` when it is an https URL (or one on the scheme and host of an `allowed` base, a local mirror) on the
    host of one of `allowed` (URLs or bare hosts), with a plain path and no userinfo, query or fragment."""
    text = str(value)
    try:
        parts = urllib.parse.urlsplit(text)
        port = parts.port
    except ValueError:
        raise _refused(text, source, "a URL") from None
    bases = [urllib.parse.urlsplit(a if "://" in a else f"https://{a}") for a in allowed]
    on_host = [b for b in bases if b.hostname == parts.hostname and (b.port == port or b.scheme == parts.scheme == "https")]
    scheme_ok = parts.scheme == "https" or any(b.scheme == parts.scheme for b in on_host)
    if not (on_host and scheme_ok and not parts.username and not parts.query and not parts.fragment
            and URL_PATH_TEXT.fullmatch(parts.path)):
        hosts = ", ".join(sorted({b.hostname or "?" for b in bases}))
        raise _refused(text, source, f"an https URL on {hosts}")
    return text


def checked_file(value: object, source: str) -> str:
    text = str(value)
    if not FILE_TEXT.fullmatch(text) or ".." in text:
        raise _refused(text, source, "a package file name")
    return text


def _is_version(text: str) -> bool:
    try:
        Version(text)
    except InvalidVersion:
        return False
    return True
