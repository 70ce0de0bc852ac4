"""One HTTP client for every request the orchestrator makes itself (PyPI's JSON, AMD's index, doctor's probes,
an HTTP channel's files): urllib's many
failures become two kinds a caller can word for its user, "nothing answered" and "answered with an error".
Also where PyPI lookups go (--pypi-url / $ORCHESTRATE_PYPI_URL), for `pins` and `pypi add` alike."""
from __future__ import annotations

import http.client
import json
import os
import re
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from .errors import UserError

USER_AGENT = "rocm-stack-orchestrate"
PYPI_URL_ENV = "ORCHESTRATE_PYPI_URL"
DEFAULT_PYPI_URL = "https://pypi.org/pypi"


# Every transfer is bounded (issue 37): a server that drips its answer (a byte every few seconds, each within the
# socket's timeout) is cut once it has had TRANSFER_GRACE_S and still averages under MIN_RATE; its status line and
# headers have HEADERS_DEADLINE_S in all; a body read whole (get) stops at a byte limit.
MIN_RATE = 16 * 1024  # bytes per second, averaged over the transfer
TRANSFER_GRACE_S = 30.0
HEADERS_DEADLINE_S = 30.0
MAX_BODY = 64 * 2**20  # what get() holds in memory unless told: no page or JSON document we read comes near it
CHUNK = 1 << 20


class Unreachable(Exception):
    """The address did not answer at all (no route, refused, DNS, timeout): the network, not the data."""


class Refused(Unreachable):
    """The address or its answer is one we do not read: not http(s), a redirect from https to http or to another
    scheme, a body over its limit, a transfer under the minimum rate. Every caller of web words Unreachable, so
    this is one line for the user too."""


class HTTPStatus(LookupError):
    """The server answered with an error status."""

    def __init__(self, url: str, code: int):
        super().__init__(f"{shown_url(url)}: HTTP {code}")
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
    block reads, becomes HTTPStatus or Unreachable (the block's other errors, a full disk say, are left alone).
    Only http(s) is read; a redirect keeps credentials only on the same scheme, host and port, and never leads
    from https to http (Refused). The response's read() and read1() hold the transfer to MIN_RATE."""
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise Refused(f"{shown_url(url)} is not an http(s) URL")
    request = urllib.request.Request(url, method=method,
                                     headers={"Accept": accept, "User-Agent": USER_AGENT, **(headers or {})})
    watch = _Watch(timeout)
    try:
        response = _opener(watch).open(request, timeout=timeout)
    except urllib.error.HTTPError as exc:
        raise HTTPStatus(exc.url or url, exc.code) from None
    except urllib.error.URLError as exc:
        raise Unreachable(_reason(exc.reason)) from None
    except Refused:
        raise
    except _UNANSWERED + (ValueError, OSError) as exc:
        if watch.expired:
            raise Unreachable(f"no status line and headers within {watch.deadline:.0f} s") from None
        raise Unreachable(_reason(exc)) from None
    finally:
        watch.headers_done()
    _bounded(response, watch)
    with response:
        try:
            yield response
        except Refused:
            raise
        except _UNANSWERED as exc:
            raise Unreachable(_reason(exc)) from None


def get(url: str, timeout: float, accept: str = "application/json", headers: dict[str, str] | None = None,
        limit: int = MAX_BODY) -> Response:
    """The whole body, at most `limit` bytes (more is Refused: a file's listed size, or MAX_BODY)."""
    with opened(url, timeout, accept, headers) as response:
        body = read_at_most(response, limit, url)
        return Response(body, response.headers.get("Content-Type", ""), response.geturl())


def read_at_most(response, limit: int, url: str) -> bytes:
    data = response.read(limit + 1)
    if len(data) > limit:
        raise Refused(f"{shown_url(url)} answered more than {limit} bytes")
    return data


def listed_size(file: dict, otherwise: int = MAX_BODY) -> int:
    """The bytes a download of a file an index lists (PyPI's JSON, a PEP 691 page) may take: its `size`, else
    `otherwise`."""
    size = file.get("size")
    return size if isinstance(size, int) and not isinstance(size, bool) and size > 0 else otherwise


def stream(response, out, limit: int | None, url: str, sink=None) -> int:
    """Copy a response to a file in chunks, stopping with Refused past `limit` bytes (None: no limit, as for a
    file whose size no index lists); `sink(chunk)` sees every chunk (a digest). The bytes written."""
    written = 0
    while True:
        chunk = response.read1(CHUNK)
        if not chunk:
            return written
        written += len(chunk)
        if limit is not None and written > limit:
            raise Refused(f"{shown_url(url)} sent more than the {limit} bytes it is listed at")
        out.write(chunk)
        if sink:
            sink(chunk)


# ---- what a server says, made safe to print; credentials kept out of what we print and write ----

# C0 and C1 control characters (a terminal acts on them: ESC sequences) and the bidirectional controls.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
TOKEN_PATH = re.compile(r"/t/[^/?#]+")  # anaconda.org's and quetz's /t/<token>/ in a channel URL


def printable(text: str) -> str:
    """Server text for a terminal or a log: each control character shown as its escape, never acted on."""
    return CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def shown_url(url: str) -> str:
    """A URL as we print or record it: no userinfo (user:password@) and no /t/<token>/ path part, and no control
    characters. The URL itself, with them, is used only to connect."""
    text = str(url)
    try:
        parts = urllib.parse.urlsplit(text)
    except ValueError:
        return printable(text)
    netloc = parts.netloc
    if "@" in netloc and not netloc.startswith("$"):  # "$VARIABLE@host" (a manifest's task) holds no secret
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    path = TOKEN_PATH.sub("/t/***", parts.path)
    if (netloc, path) != (parts.netloc, parts.path):
        text = urllib.parse.urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment))
    return printable(text)


def redact_urls(text: str) -> str:
    """Every URL in a text (an error from a library) as shown_url shows it."""
    return printable(re.sub(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]+", lambda m: shown_url(m.group()), str(text)))


def _reason(exc) -> str:
    """A library's or a server's error text for one line: URLs redacted, control characters and line breaks shown."""
    return redact_urls(str(exc) or exc.__class__.__name__).replace("\n", "\\n")


class _Watch:
    """One transfer's clock: the socket is shut when the status line and headers take over HEADERS_DEADLINE_S
    (each byte arriving within the socket timeout would otherwise hold us for ever)."""

    def __init__(self, timeout: float):
        self.timeout, self.started, self.expired = timeout, time.monotonic(), False
        self._sock = None
        self.deadline = max(HEADERS_DEADLINE_S, timeout)
        self._timer = threading.Timer(self.deadline, self._expire)
        self._timer.daemon = True

    def arm(self, sock) -> None:
        self._sock = sock
        if not self._timer.is_alive():
            self._timer.start()

    def headers_done(self) -> None:
        self._timer.cancel()

    def _expire(self) -> None:
        self.expired = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except (OSError, AttributeError):
            pass


def _bounded(response, watch: _Watch) -> None:
    """Make the response's reads stop a transfer that averages under MIN_RATE once TRANSFER_GRACE_S has passed
    (a byte every 2 s would otherwise go on for ever: each read is within the socket timeout)."""
    started, received = time.monotonic(), [0]
    read1 = response.read1

    def check(data: bytes) -> bytes:
        received[0] += len(data)
        elapsed = time.monotonic() - started
        if data and elapsed > TRANSFER_GRACE_S and received[0] < MIN_RATE * elapsed:
            raise Refused(f"{shown_url(response.geturl())} sent {received[0]} bytes in {elapsed:.0f} s, under "
                          f"{MIN_RATE // 1024} KiB/s")
        return data

    def bounded_read(amount=None):
        if amount is None:
            chunks = []
            while chunk := bounded_read1(CHUNK):
                chunks.append(chunk)
            return b"".join(chunks)
        chunks, wanted = [], amount
        while wanted > 0:
            chunk = bounded_read1(min(wanted, CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            wanted -= len(chunk)
        return b"".join(chunks)

    def bounded_read1(amount=CHUNK):
        data = read1(amount)
        if not data and amount and response.length:  # cut before the Content-Length it announced
            raise http.client.IncompleteRead(b"", response.length)
        return check(data)

    response.read, response.read1 = bounded_read, bounded_read1


def _opener(watch: _Watch) -> urllib.request.OpenerDirector:
    """http and https only (no file:, ftp: or data: handler), redirects that keep credentials with their host."""
    class Connection(http.client.HTTPConnection):
        def connect(self):
            super().connect()
            watch.arm(self.sock)

    class TLSConnection(http.client.HTTPSConnection):
        def connect(self):
            super().connect()
            watch.arm(self.sock)

    class Plain(urllib.request.HTTPHandler):
        def http_open(self, req):
            return self.do_open(Connection, req)

    class TLS(urllib.request.HTTPSHandler):
        def https_open(self, req):
            return self.do_open(TLSConnection, req, context=self._context)

    opener = urllib.request.OpenerDirector()
    for handler in (urllib.request.ProxyHandler(), urllib.request.UnknownHandler(), Plain(), TLS(), urllib.request.HTTPDefaultErrorHandler(),
                    _Redirects(), urllib.request.HTTPErrorProcessor()):
        opener.add_handler(handler)
    return opener


class _Redirects(urllib.request.HTTPRedirectHandler):
    """urllib copies every header to wherever a redirect points, Authorization included (issue 37, a03): here a
    redirect to another scheme, host or port drops credentials, and https never leads to http."""

    CREDENTIALS = {"authorization", "cookie", "proxy-authorization", "x-api-key"}

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        old, new = urllib.parse.urlsplit(req.full_url), urllib.parse.urlsplit(urllib.parse.urljoin(req.full_url, newurl))
        if new.scheme not in ("http", "https"):
            raise Refused(f"{shown_url(req.full_url)} redirects to {shown_url(newurl)}, which is not http(s)")
        if old.scheme == "https" and new.scheme == "http":
            raise Refused(f"{shown_url(req.full_url)} redirects to plain http ({shown_url(newurl)}): refused, the "
                          "answer could be read or changed on the way")
        redirected = super().redirect_request(req, fp, code, msg, headers, newurl)
        if redirected is not None and (old.scheme, old.hostname, old.port) != (new.scheme, new.hostname, new.port):
            for name in list(redirected.headers):
                if name.lower() in self.CREDENTIALS:
                    del redirected.headers[name]
            for name in list(redirected.unredirected_hdrs):
                if name.lower() in self.CREDENTIALS:
                    del redirected.unredirected_hdrs[name]
        return redirected


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
