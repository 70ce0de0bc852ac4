"""`orchestrate page`: regenerate a channel's index.html and channel-page.json from what the channel holds.

build-all and publish write the page themselves; this command is for a channel whose page is missing or
out of date (published by an older orchestrator, or after the architecture table changed), and for a look at
the page without building. It writes through the same code they do (channel_page.py), under the same lock."""
from __future__ import annotations

import argparse
from pathlib import Path

from ...channel import MANIFEST, Channel
from ...errors import UserError
from ...options import DEFAULT_CHANNEL, existing_folder, find_workspace, folder, load_config
from .. import _options, _s3_arguments, _s3_flags, install_channel, shared_channel
from ..channel_page import PAGE_FILES, write_local_page, write_published_page
from ..store import FolderStore, Store
from ..targets import parse_target


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=existing_folder, metavar="DIR",
                        help="folder with recipes/ and variants/ (default: found from here)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--channel", type=folder, help=f"local channel folder (default: <workspace>/{DEFAULT_CHANNEL})")
    where.add_argument("--to", metavar="URL", type=shared_channel,
                       help="a shared channel instead: a folder, file:///dir or s3://bucket/channel")
    parser.add_argument("--url", type=install_channel, help="the address teammates install from, for the page's install snippet "
                                      "(default: the --to URL; for a local channel, a placeholder)")
    parser.add_argument("--quiet", "-q", action="store_true", help="plain lines only")
    _s3_arguments(parser)


def _target(args, config: dict) -> Store:
    """The store to write the page into: the shared channel (--to), or the local one as a FolderStore."""
    if args.to:
        target = parse_target(args.to, config, **_s3_flags(args, args.to))
        if not isinstance(target, Store) or not target.writable:
            raise UserError(f"cannot write to {args.to}: `orchestrate page --to` writes to a folder, file:// or s3:// "
                            "channel; for one behind http(s):// or a package server, run it where its files are")
        return target
    _s3_flags(args, None)
    return FolderStore(args.channel.resolve() if args.channel else _options(args).channel)


def run(args, reporter) -> int:
    workspace = (args.workspace or find_workspace(Path.cwd())).resolve()
    config = load_config(workspace)
    store = _target(args, config)
    if store.size("noarch/repodata.json") is None and store.size(MANIFEST) is None:  # a stat, not a read
        raise UserError(f"{store.url} holds no channel yet (no noarch/repodata.json): build into it or publish to "
                        "it first, then run `orchestrate page` again")
    store.check()
    variants = workspace / "variants"
    if args.to:  # the lock or compare-and-swap publish writes its page under
        with store.exclusive("orchestrate page", reporter.info):
            written = write_published_page(store, variants, config, reporter.error, channel_url=args.url, fatal=True)
    else:
        local = Channel(store.path)
        local.lock("orchestrate page")  # build-all writes the local channel's page under this lock
        try:
            written = write_local_page(store.path, variants, config, reporter.error, channel_url=args.url, fatal=True)
        finally:
            local.unlock()
    if not written:  # the line saying why is out
        return 1
    reporter.line(f"wrote {' and '.join(PAGE_FILES)} to {store.url.rstrip('/')}/")
    return 0


COMMAND = ("page", "regenerate the channel's page (index.html) and its data (channel-page.json)", add_arguments, run)
