"""One HTTP client for every request the orchestrator makes itself (PyPI's JSON, AMD's index, doctor's probes,
an HTTP channel's files): urllib's many
failures become two kinds a caller can word for its user, "nothing answered" and "answered with an error".
Also where PyPI lookups go (--pypi-url / $ORCHESTRATE_PYPI_URL), for `pins` and `pypi add` alike."""
from __future__ import annotations

import http.client
import json
import os
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .errors import UserError

USER_AGENT = "rocm-stack-orchestrate"
PYPI_URL_ENV = "ORCHESTRATE_PYPI_URL"
DEFAULT_PYPI_URL = "https://pypi.org/pypi"


class Unreachable(Exception):
    """The address did not answer at all (no route, refused, DNS, timeout): the network, not the data."""


class HTTPStatus(LookupError):
    """The server answered with an error status."""

    def __init__(self, url: str, code: int):
        super().__init__(f"{url}: HTTP {code}")
        self.url, self.code = url, code


@dataclass(frozen=True)
class Response:
    body: bytes
    content_type: str
    url: str  # after redirects: relative links on the page are relative to it


# How "nothing answered" looks to urllib besides URLError: a timeout, a connection refused or cut mid-answer
# (and, when sending, a URL it cannot send: ValueError, unknown url type).
_UNANSWERED = (socket.timeout, TimeoutError, ConnectionError, http.client.HTTPException)


@contextmanager
def opened(url: str, timeout: float, accept: str = "*/*", headers: dict[str, str] | None = None,
           method: str = "GET") -> Iterator[http.client.HTTPResponse]:
    """The response, open to be read or streamed; failing to connect, or a connection that breaks while the
    block reads, becomes HTTPStatus or Unreachable (the block's other errors, a full disk say, are left alone)."""
    request = urllib.request.Request(url, method=method,
                                     headers={"Accept": accept, "User-Agent": USER_AGENT, **(headers or {})})
    try:
        response = urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        raise HTTPStatus(url, exc.code) from None
    except urllib.error.URLError as exc:
        raise Unreachable(str(exc.reason)) from None
    except _UNANSWERED + (ValueError,) as exc:
        raise Unreachable(str(exc) or exc.__class__.__name__) from None
    with response:
        try:
            yield response
        except _UNANSWERED as exc:
            raise Unreachable(str(exc) or exc.__class__.__name__) from None


def get(url: str, timeout: float, accept: str = "application/json", headers: dict[str, str] | None = None) -> Response:
    with opened(url, timeout, accept, headers) as response:
        return Response(response.read(), response.headers.get("Content-Type", ""), response.geturl())


def head(url: str, timeout: float) -> int:
    """The HTTP status a server answers a HEAD request with (an error status raises HTTPStatus)."""
    with opened(url, timeout, method="HEAD") as response:
        return response.status


def get_json(url: str, timeout: float) -> dict:
    """GET a JSON document; a body that is not JSON is a LookupError like an error status."""
    try:
        return json.loads(get(url, timeout).body)
    except (ValueError, UnicodeDecodeError):
        raise LookupError(f"{url}: not JSON") from None


def http_url(url: str, said: str, wanted: str) -> str:
    """`url`, when it is an http(s) URL; else a UserError naming where it was given (`said`: the flag or the
    variable) and what to give."""
    if not url.startswith(("http://", "https://")):
        raise UserError(f"{said} {url} is not an http(s) URL: give {wanted}")
    return url


def pypi_base(given: str | None) -> str:
    """The PyPI JSON API base a lookup uses: --pypi-url, else $ORCHESTRATE_PYPI_URL, else PyPI itself."""
    url = (given or os.environ.get(PYPI_URL_ENV) or DEFAULT_PYPI_URL).rstrip("/")
    return http_url(url, "--pypi-url" if given else f"${PYPI_URL_ENV}", f"the JSON API base, e.g. {DEFAULT_PYPI_URL}")
