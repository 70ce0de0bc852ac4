"""`orchestrate page`: regenerate a channel's index.html and channel-page.json from what the channel holds.

build-all and publish write the page themselves; this command is for a channel whose page is missing or
out of date (published by an older orchestrator, or after the architecture table changed), and for a look at
the page without building."""
from __future__ import annotations

import argparse
import datetime
from pathlib import Path

from ...architectures import ArchitectureTable
from ...channel import MANIFEST, Channel
from ...errors import UserError
from ...options import DEFAULT_CHANNEL, existing_folder, find_workspace, folder, load_config
from .. import _options, _s3_arguments, _s3_flags, install_channel, shared_channel
from ..store import FolderStore, Store
from ..targets import parse_target
from . import build_page


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=existing_folder,
                        help="folder with recipes/ and variants/ (default: found from here)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--channel", type=folder, help=f"local channel folder (default: <workspace>/{DEFAULT_CHANNEL})")
    where.add_argument("--to", metavar="URL", type=shared_channel,
                       help="a shared channel instead: a folder, file:///dir or s3://bucket/channel")
    parser.add_argument("--url", type=install_channel, help="the address teammates install from, for the page's install snippet "
                                      "(default: the --to URL; for a local channel, a placeholder)")
    parser.add_argument("--quiet", "-q", action="store_true", help="plain lines only")
    _s3_arguments(parser)


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _target(args) -> tuple[Store, str | None]:
    """The store to write the page into (a FolderStore for the local channel), and the channel's address for
    the install snippet."""
    if args.to:
        target = parse_target(args.to, load_config(_workspace(args)), **_s3_flags(args))
        if not isinstance(target, Store) or not target.writable:
            raise UserError(f"cannot write to {args.to}: `orchestrate page --to` writes to a folder, file:// or s3:// "
                            "channel; for one behind http(s):// or a package server, run it where its files are")
        return target, args.url or args.to
    path = args.channel.resolve() if args.channel else _options(args).channel
    return FolderStore(path), args.url


def _workspace(args) -> Path:
    return (args.workspace or find_workspace(Path.cwd())).resolve()


def write_page(store: Store, table: ArchitectureTable, channel_url: str | None, waiting=print) -> list[str]:
    """Write index.html and channel-page.json into the channel; the page is made under the lock (or by
    compare-and-swap on S3) that publish takes, so it lists what the channel holds when it is written."""
    with store.exclusive("orchestrate page", waiting):
        files = build_page(store, table, channel_url=channel_url, generated=now())
        for name, data in files.items():
            store.update(name, lambda _current, data=data: data)
    return list(files)


def run(args, reporter) -> int:
    table = ArchitectureTable.load(_workspace(args) / "variants")
    store, channel_url = _target(args)
    if store.read("noarch/repodata.json") is None and store.read(MANIFEST) is None:
        raise UserError(f"{store.url} holds no channel yet (no noarch/repodata.json): build into it or publish to "
                        "it first, then run `orchestrate page` again")
    store.check()
    local = None if args.to else Channel(store.path)
    if local:
        local.lock("orchestrate page")  # build-all writes the local channel's page under this lock too
    try:
        written = write_page(store, table, channel_url, reporter.info)
    finally:
        if local:
            local.unlock()
    reporter.line(f"wrote {' and '.join(written)} to {store.url.rstrip('/')}/")
    return 0


COMMAND = ("page", "regenerate the channel's page (index.html) and its data (channel-page.json)", add_arguments, run)
