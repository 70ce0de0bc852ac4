"""The channel's own page: index.html at the channel root, and channel-page.json beside it for scripts.

For each GPU architecture the channel holds: its GPUs, the stack's versions and which build made each, the
latest check, and the quick benchmark with its history and regressions; plus how to install from the
channel. Read from the channel alone (through a Store), so any machine can regenerate it: `orchestrate page`.
"""
from __future__ import annotations

import json

from ...architectures import ArchitectureTable
from .model import SCHEMA, channel_data
from .render import page_html

__all__ = ["SCHEMA", "build_page"]


def build_page(store, table: ArchitectureTable, *, channel_url: str | None, generated: str,
               config: dict | None = None) -> dict[str, bytes]:
    """{"channel-page.json": ..., "index.html": ...} for what `store` holds; reads only, writes nothing. The data
    comes first, so a writer that follows this order never shows a page whose data is not there yet. `config`
    (orchestrate.toml's contents) gives an S3 channel's install snippet its [s3-options]."""
    data = channel_data(store, table, channel_url=channel_url, generated=generated, config=config or {})
    # allow_nan=False: channel-page.json stays JSON whatever a channel held (untrusted.py refuses such values first);
    # no indent: the C encoder, many times faster than the indenting one on a large channel
    return {"channel-page.json": (json.dumps(data, allow_nan=False) + "\n").encode(),
            "index.html": page_html(data).encode()}
