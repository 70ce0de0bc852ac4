"""Servers on 127.0.0.1 that the sharing tests start and stop themselves, and a built test channel.

Nothing here contacts any other address. Every server is a child process with a bounded start-up
wait and is terminated when its fixture ends.
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from stack import make_workspace  # noqa: F401  (re-exported for the share tests)

REPO = Path(__file__).resolve().parent.parent
ARCH = "gfx1151"
ISA = "11.5.1"
STACK_SPECS = ["pytorch", "flash-attn", "vllm", "rocm-stack-check"]
STARTUP_TIMEOUT_S = 30
# Keys for the S3 server; moto (without IAM enforcement) accepts any, rattler and boto3 need some.
S3_ENV = {"AWS_ACCESS_KEY_ID": "testing-key", "AWS_SECRET_ACCESS_KEY": "testing-secret", "AWS_REGION": "us-east-1"}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, log) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            if log:
                log.seek(0)
            raise RuntimeError(f"server exited with {process.returncode} before listening on {port}: "
                               f"{(log or process.stdout).read()[-2000:]}")
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        time.sleep(0.05)
    raise RuntimeError(f"nothing listened on 127.0.0.1:{port} within {STARTUP_TIMEOUT_S}s")


@contextlib.contextmanager
def running(command: list[str], port: int, env: dict | None = None, log_to_file: bool = False):
    """The server's output comes on process.stdout; with log_to_file (a server that logs every request),
    into a file instead: a pipe that nobody reads fills up and stops the server mid-request."""
    environment = {k: v for k, v in os.environ.items() if k != "INITIAL_NO_AUTH_ACTION_COUNT"}
    log = tempfile.TemporaryFile("w+") if log_to_file else None
    process = subprocess.Popen(command, env={**environment, **(env or {})}, stdout=log or subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    try:
        wait_for_port(port, process, log)
        yield process
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if log:
            log.close()


@contextlib.contextmanager
def moto_server(enforce_iam: bool = False):
    """An S3-compatible server (moto) on 127.0.0.1; yields its endpoint URL."""
    pytest.importorskip("moto.server", reason="needs moto[server]: pip install -e '.[test,share]'")
    port = free_port()
    # With IAM enforced, the first 3 requests (create user, key, policy) are let through unsigned.
    env = {"INITIAL_NO_AUTH_ACTION_COUNT": "3"} if enforce_iam else {}
    with running([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)], port, env,
                 log_to_file=True):
        yield f"http://127.0.0.1:{port}"


def s3_client(endpoint: str, key_id: str = S3_ENV["AWS_ACCESS_KEY_ID"], secret: str = S3_ENV["AWS_SECRET_ACCESS_KEY"]):
    import boto3
    from botocore.config import Config

    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=key_id,
                        aws_secret_access_key=secret, config=Config(s3={"addressing_style": "path"}))


def bucket_keys(client, bucket: str) -> dict[str, bytes]:
    listing = client.list_objects_v2(Bucket=bucket).get("Contents", [])
    return {o["Key"]: client.get_object(Bucket=bucket, Key=o["Key"])["Body"].read() for o in listing}


# The CLI's own main(), but leaving through os._exit: py-rattler(-build)'s background threads sometimes
# crash the interpreter while it finalizes after a successful build (exit 134/139, "PyGILState_Release
# ... finalizing"; seen with and without orchestrate.share), which would make these tests flaky.
EXIT_WITHOUT_FINALIZING = (
    "import os, sys; from orchestrate.cli import main; code = main(sys.argv[1:]); "
    "sys.stdout.flush(); sys.stderr.flush(); os._exit(code)"
)


def orchestrate(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: int = 120):
    """Run the real command line in a child process; returns CompletedProcess (text). One line per row and per
    problem, as on a wide terminal: the tests read lines (tests/test_user_paths.py checks 80 columns)."""
    command = [sys.executable, "-c", EXIT_WITHOUT_FINALIZING, *args]
    return subprocess.run(command, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True,
                          timeout=timeout)


def build_channel(workspace: Path, channel: Path, *extra: str, env: dict | None = None):
    return orchestrate("build-all", "--workspace", str(workspace), "--channel", str(channel), "--arch", ARCH,
                       "--no-tests", *extra, env=env)


def solve_and_install(channel_url: str, prefix: Path, client=None) -> list[str]:
    """Solve the stack from one channel as a gfx1151 machine would, install it; returns installed names."""
    from rattler import Channel, Subdir, VirtualPackage, VirtualPackageOverrides, install, solve
    from rattler.repo_data.gateway import Gateway

    overrides = {"CONDA_OVERRIDE_AMDGPU": "0", "CONDA_OVERRIDE_AMDGPU_ARCH": ISA}
    saved = {k: os.environ.get(k) for k in overrides}
    os.environ.update(overrides)
    try:
        machine = [v.into_generic() for v in VirtualPackage.detect(VirtualPackageOverrides.from_env())]
    finally:
        for key, value in saved.items():
            os.environ.pop(key) if value is None else os.environ.__setitem__(key, value)
    gateway = Gateway(cache_dir=prefix.parent / "repodata-cache", client=client) if client else \
        Gateway(cache_dir=prefix.parent / "repodata-cache")
    records = asyncio.run(solve(sources=[Channel(channel_url)], specs=STACK_SPECS, gateway=gateway,
                                platforms=[Subdir("linux-64"), Subdir("noarch")], virtual_packages=machine,
                                timeout=None))
    asyncio.run(install(records, target_prefix=prefix, cache_dir=prefix.parent / "pkgs-cache", client=client,
                        show_progress=False))
    return sorted(r.name.normalized for r in records)


def s3_rattler_client(endpoint: str, bucket: str):
    from rattler.networking import Client
    from rattler.networking.middleware import S3Config, S3Middleware

    return Client([S3Middleware({bucket: S3Config(endpoint, "us-east-1", "path")})])
