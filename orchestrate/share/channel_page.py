"""Writing the channel's page (index.html) and its data (channel-page.json) at the channel's root, from what
the channel holds (share/page builds them): by build-all into the local channel, under the channel lock; by
publish right after indexing, under the store's lock or compare-and-swap; and by `orchestrate page`, which
takes the same lock as the command that would otherwise write it.

For build-all and publish a page is a convenience: one that cannot be made or written costs a warning line,
never the build or the publish, and the channel stays as it was. Each file is replaced whole (a rename, or one
S3 PUT), so a killed command leaves the previous page or the new one, never half of one.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from ..architectures import ArchitectureTable
from ..channel import MANIFEST, SUBDIRS
from .bench import BENCH_DIR
from .s3 import S3Store
from .store import FolderStore, Store
from .untrusted import MAX_INDEX_BYTES, Refused, read_json, write_in

PAGE_FILES = ("channel-page.json", "index.html")  # the data first: a page never names data that is not there


def write_page(store: Store, variants_dir: Path, config: dict, channel_url: str | None,
               put: Callable[[str, Callable[[bytes | None], bytes]], None], warn: Callable[[str], None],
               fatal: bool = False) -> bool:
    """Put each page file, made from what `store` holds; False (after one line for `warn`) when that failed:
    a warning beside a build or publish, or, `fatal` (`orchestrate page`), the command's error.

    `config` is orchestrate.toml's contents: the install snippet of an S3 channel carries its [s3-options].
    `put(name, make)` writes make(current bytes) as the file: `Store.update` when publishing. On S3 that is a
    compare-and-swap, and the page is made again inside each attempt, after the read it is checked against:
    a page written by another publisher since was made before our index, so ours must be made after it."""
    try:
        from .page import build_page

        table = ArchitectureTable.load(variants_dir)
        pages: dict[str, bytes] = {}

        def make(name: str) -> bytes:
            # made once per attempt at the data file; the page beside it shows the same data (not made twice)
            if name == PAGE_FILES[0] or not pages:
                pages.update(build_page(store, table, channel_url=channel_url, config=config,
                                        generated=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())))
            if not isinstance(pages.get(name), bytes):
                raise ValueError(f"the page builder gave no {name}")
            return pages[name]

        for name in PAGE_FILES:
            put(name, lambda _current, name=name: make(name))
        return True
    except Exception as exc:  # whatever goes wrong making the page (a stop is no Exception: it goes through)
        # the type too: a bare "'str' object has no attribute 'get'" says nothing of where it came from
        reason = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}".rstrip(": ")
        if fatal:
            warn(f"the channel page at {store.url} was not written ({reason}): fix that, then run `orchestrate page` "
                 "again")
        else:
            warn(f"warning: the channel page at {store.url} was not updated ({reason}); the channel itself is "
                 "complete. `orchestrate page` writes it again")
        return False


def write_local_page(channel_path: Path, variants_dir: Path, config: dict, warn: Callable[[str], None], *,
                     channel_url: str | None = None, fatal: bool = False) -> bool:
    """The local channel's page; call under the channel lock. Without `channel_url` (nobody has said where it
    is served) the install snippet shows a placeholder."""
    def put(name: str, make: Callable[[bytes | None], bytes]) -> None:
        write_in(Path(channel_path), name, make(None))

    return write_page(FolderStore(channel_path), variants_dir, config, channel_url, put, warn, fatal)


def local_page_stale(channel_path: Path) -> bool:
    """Whether the local channel's page is missing, or older than an index, the manifest or a benchmark result
    (a bench/<arch>/ folder's time changes as a result is renamed into it). A stop after the last package went
    in and before the page was written leaves such a page; the next build-all, with nothing to build, sees it
    here. A few stat calls, no reading."""
    channel_path = Path(channel_path)
    try:
        made = min((channel_path / name).stat().st_mtime_ns for name in PAGE_FILES)
    except OSError:
        return True
    bench = channel_path / BENCH_DIR
    sources = [channel_path / subdir / "repodata.json" for subdir in SUBDIRS] + [channel_path / MANIFEST, bench]
    sources += [p for p in bench.iterdir() if p.is_dir()] if bench.is_dir() else []
    for source in sources:
        try:
            if source.stat().st_mtime_ns > made:
                return True
        except OSError:
            continue  # not there: nothing the page could be older than
    return False


def published_page_current(store: Store, listed: dict[str, dict]) -> bool:
    """Whether the shared channel's page is there and its data names exactly the packages the index lists
    (`listed`: lookup.read_index's keys). A publish stopped after indexing and before the page leaves one that
    does not; the next publish, with nothing to place, sees it here (a store has no cheap modification time to
    compare, as the local channel's page has)."""
    try:
        data = read_json(store, PAGE_FILES[0], MAX_INDEX_BYTES)
        if data is None or store.size(PAGE_FILES[1]) is None:
            return False
        rows = [row for arch in data.get("architectures") or [] for row in arch.get("packages") or []]
        named = {row["file"] for row in rows + list(data.get("noarch") or [])}
    except (TypeError, KeyError, AttributeError, Refused):
        return False  # a page whose data is not what build_page writes is made again
    return named == set(listed)


def write_published_page(store: Store, variants_dir: Path, config: dict, warn: Callable[[str], None], *,
                         channel_url: str | None = None, fatal: bool = False) -> bool:
    """A shared channel's page; call inside `store.exclusive`, after indexing. An S3 store's own settings (the
    command's --s3-* flags included) are what its install snippet names."""
    if isinstance(store, S3Store):
        config = {**config, "s3-options": {**(config.get("s3-options") or {}), store.bucket: store.options.table()}}
    return write_page(store, variants_dir, config, channel_url or store.url, store.update, warn, fatal)
