"""`orchestrate serve`: the local channel over HTTP, for a lab or a LAN; `/` is the channel's page (index.html,
which build-all writes).

Loopback by default; any other address is a choice the command states when it starts, because
then everyone who can reach the machine can download every package. Hidden files (the channel lock,
.superseded/ backups, uploads in progress) are never served, nor a symlink unless it leads to a visible file
inside the channel. A path with a NUL or another control character, or bytes that are no UTF-8, gets 400; a
client that goes away mid-download is one log line.

Bounded: a connection that sends nothing for IDLE_TIMEOUT_S is closed, and at most MAX_CONNECTIONS are open at
once; at the cap a new connection closes the one that has waited longest without sending a whole request (about
1,020 idle connections starved the server and spun it at 100% CPU: attack a09 of issue 37), and when every one is
busy with a request it is answered 503 at once.

Plain HTTP: for loopback and a LAN you trust. Anyone on the path reads and can change what is fetched; put TLS
in front of it for anything else (docs/sharing.md, "Serving over TLS"), and have readers name trusted keys.
"""
from __future__ import annotations

import errno
import functools
import ipaddress
import os
import posixpath
import signal
import socket
import sys
import threading
import time
import urllib.parse
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from .. import stops
from ..channel import Channel
from ..errors import UserError
from ..ui import Reporter
from .untrusted import Refused, bad_characters, open_file

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
IDLE_TIMEOUT_S = 30  # a connection silent this long (no request, or a stalled read or write) is closed
MAX_CONNECTIONS = 128  # open at once; far below the usual 1024 descriptors


class ChannelRequestHandler(SimpleHTTPRequestHandler):
    timeout = IDLE_TIMEOUT_S  # socket timeout: an idle or stalled client is dropped, never waited for forever

    def __init__(self, *args, reporter: Reporter, **kwargs):
        self.reporter = reporter
        super().__init__(*args, **kwargs)

    def _refusal(self) -> int | None:
        """The status to answer instead of the file (400: a bad path; 404: hidden, or a symlink leading out of
        the channel or to a hidden file in it), or None to serve it."""
        path = urllib.parse.urlsplit(self.path).path
        try:
            decoded = urllib.parse.unquote(path, errors="strict")
        except UnicodeDecodeError:
            return 400
        if bad_characters(decoded):
            return 400
        if any(part.startswith(".") for part in posixpath.normpath(decoded).split("/")):
            return 404
        root = os.path.realpath(self.directory)
        target = os.path.realpath(self.translate_path(self.path))
        if target == root:
            return None
        if os.path.commonpath([root, target]) != root:
            return 404
        return 404 if any(part.startswith(".") for part in os.path.relpath(target, root).split(os.sep)) else None

    def parse_request(self) -> bool:
        whole = super().parse_request()
        if whole:  # its request line and headers are in: no longer idle (a client dribbling headers still is)
            self.server.busy(self.connection, True)
        return whole

    def handle_one_request(self):
        try:
            super().handle_one_request()
        finally:
            self.server.busy(self.connection, False)

    def do_GET(self):
        status = self._refusal()
        if status:
            self.send_error(status)
            return None
        return super().do_GET()

    def do_HEAD(self):
        status = self._refusal()
        if status:
            self.send_error(status)
            return None
        return super().do_HEAD()

    def _open_visible(self, path: str) -> int | None:
        """A read descriptor of the file `path` leads to when that is a visible plain file inside the channel,
        opened by the channel's reader (untrusted.open_file: no symlink on the way, no FIFO that would hang the
        handler), so a file swapped for a symlink after the checks above is refused, not followed; else None."""
        root = self.directory  # resolved as the server started: a channel folder swapped for a symlink is refused
        relpath = os.path.relpath(os.path.realpath(path), root)
        if relpath == os.curdir or any(part.startswith(".") for part in relpath.split(os.sep)):
            return None  # outside the channel (`..`), or hidden
        try:
            return open_file(Path(root), relpath.replace(os.sep, "/"))
        except Refused:
            return None

    def send_head(self):
        path = self.translate_path(self.path)
        folder = os.path.isdir(path)
        if folder and not urllib.parse.urlsplit(self.path).path.endswith("/"):
            return super().send_head()  # the redirect to the folder's URL with a slash
        fd = self._open_visible(os.path.join(path, "index.html") if folder else path)
        if fd is None:
            return self.list_directory(path) if folder else self.send_error(404)
        file = os.fdopen(fd, "rb")
        self.send_response(200)
        self.send_header("Content-type", self.guess_type(path if not folder else "index.html"))
        self.send_header("Content-Length", str(os.fstat(fd).st_size))
        self.send_header("Last-Modified", self.date_time_string(os.fstat(fd).st_mtime))
        self.end_headers()
        return file

    def list_directory(self, path):
        # A channel is read through its index, not by browsing; a folder with an index.html (the channel's
        # root) never gets here: the handler answers with that page.
        if os.path.realpath(path) == os.path.realpath(self.directory):
            self.send_error(404, "this channel has no page yet: `orchestrate build-all` or `orchestrate page` "
                                 "writes it")
        else:
            self.send_error(404)
        return None

    def log_message(self, format, *args):
        self.reporter.info(f"{self.address_string()} {format % args}")


class ChannelServer(ThreadingHTTPServer):
    reporter: Reporter
    max_connections = MAX_CONNECTIONS
    request_queue_size = 128  # the listen backlog: socketserver's 5 made each of many connections wait for a retry

    def __init__(self, *args, **kwargs):
        self._open: dict[socket.socket, list] = {}  # connection -> [idle since, busy with a request]
        self._open_lock = threading.Lock()
        super().__init__(*args, **kwargs)

    def busy(self, connection, busy: bool) -> None:
        """Whether `connection` is busy with a request; idle again, it is idle since now."""
        with self._open_lock:
            if connection in self._open:
                self._open[connection] = [self._open[connection][0] if busy else time.monotonic(), busy]

    def process_request(self, request, client_address):
        """At the cap: close the connection idle longest to make room, or answer 503 when all are busy."""
        victim, full = None, False
        with self._open_lock:
            if len(self._open) >= self.max_connections:
                idle = [(since, conn) for conn, (since, busy) in self._open.items() if not busy]
                victim = min(idle, key=lambda pair: pair[0])[1] if idle else None
                full = victim is None
                if victim is not None:
                    del self._open[victim]
            if not full:
                self._open[request] = [time.monotonic(), False]
        if full:
            self._refuse_busy(request)
            return
        if victim is not None:
            try:
                victim.shutdown(socket.SHUT_RDWR)  # its handler's read returns; the handler closes it
            except OSError:
                pass
        super().process_request(request, client_address)

    def get_request(self):
        try:
            return super().get_request()
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE):  # out of descriptors: wait a moment, never spin on accept
                time.sleep(0.1)
            raise

    def _refuse_busy(self, request) -> None:
        try:
            request.settimeout(1)
            request.sendall(b"HTTP/1.0 503 Service Unavailable\r\nRetry-After: 5\r\nContent-Length: 0\r\n\r\n")
        except OSError:
            pass
        self.shutdown_request(request)

    def shutdown_request(self, request):
        with self._open_lock:
            self._open.pop(request, None)
        super().shutdown_request(request)

    def handle_error(self, request, client_address):
        """One line, never a traceback: a client that went away mid-download (or any other failed request)."""
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError):
            self.reporter.info(f"{client_address[0]} went away before its answer was sent ({type(exc).__name__})")
        else:
            self.reporter.error(f"{client_address[0]}: the request failed ({type(exc).__name__}: "
                                f"{' '.join(str(exc).split())[:200]})")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def make_server(channel_path: Path, host: str, port: int, reporter: Reporter) -> ThreadingHTTPServer:
    channel = Channel(channel_path)
    if not channel.is_channel():
        raise UserError(f"{channel.path} is not a channel yet: build into it first or pass --channel DIR")
    handler = functools.partial(ChannelRequestHandler, directory=str(channel.path), reporter=reporter)
    try:
        server = ChannelServer((host, port), handler)
        server.reporter = reporter
        return server
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port} ({exc.strerror}): pick another --port or --host") from None


def serve(channel_path: Path, host: str, port: int, reporter: Reporter) -> int:
    server = make_server(channel_path, host, port, reporter)
    bound_host, bound_port = server.server_address[:2]
    url = f"http://{'[' + bound_host + ']' if ':' in bound_host else bound_host}:{bound_port}/"
    reporter.line(f"serving channel {Path(channel_path).resolve()} at {url}")
    if is_loopback(host):
        reporter.line("only this machine can reach it (loopback); pass --host 0.0.0.0 to share it on the network")
    else:
        reporter.line(f"listening on {host}: anyone who can reach this machine on port {bound_port} can download "
                      "every package in the channel")
    if is_loopback(host):  # a teammate's 127.0.0.1 is their own machine
        reporter.line(f"on this machine: orchestrate consumer-manifest --channel {url.rstrip('/')}   (Ctrl-C stops)")
    else:
        every_address = bound_host in ("0.0.0.0", "::")
        teammate_url = url.replace(bound_host, socket.gethostname(), 1) if every_address else url
        note = "; if they cannot resolve this machine's name, use its address on their network" if every_address else ""
        reporter.line(f"teammates: orchestrate consumer-manifest --channel {teammate_url.rstrip('/')}   (Ctrl-C "
                      f"stops{note})")
        reporter.line("plain HTTP: anyone on the network path can read and change what teammates download; keep it to "
                      "a LAN you trust, or put TLS in front of it (docs/sharing.md, Serving over TLS), and have "
                      "readers name your signing key with --trusted-key")
    sys.stdout.flush()  # a supervisor or test reading the URL from a pipe must see it now
    try:
        server.serve_forever()
    except (stops.Stopped, KeyboardInterrupt) as stop:
        # Stopping is how a server ends: exit 0, which systemd and supervisors count as a clean stop.
        stops.report_once()
        reporter.line(f"stopped serving ({'SIGTERM' if getattr(stop, 'signum', 0) == signal.SIGTERM else 'Ctrl-C'})")
    finally:
        server.server_close()
    return 0
