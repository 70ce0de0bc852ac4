"""The url sources of a rendered package that have no checksum to check a download by: none written, or a lock
entry not filled yet (AMD's files before `pins --lock`), and how a plan names them."""
from __future__ import annotations

from .prebuilt import LOCK_COMMAND, LOCK_FILE, SHA256_SUFFIX, URL_SUFFIX
from .recipes import Output
from .sources import ZERO_SHA256, Source, sources_of


def unpinned_of(output: Output) -> list[Source]:
    """Url sources without a checksum: none written, or a `KEY_sha256` variant key left empty by an incomplete
    lock (rendered as 64 zeros, which a recipe that writes them out means as a wrong checksum, not as none)."""
    unlocked = unlocked_urls(output)
    return [s for s in sources_of(output.rendered) if s.kind == "url"
            and (not s.pin or (s.pin == ZERO_SHA256 and s.location in unlocked))]


def unlocked_urls(output: Output) -> set[str]:
    """The prebuilt artifacts the lock has no sha256 for yet (their `KEY_sha256` variant key is empty)."""
    return {output.variant.get(key[:-len(SHA256_SUFFIX)] + URL_SUFFIX) for key, value in output.variant.items()
            if key.endswith(SHA256_SUFFIX) and value == ""}


def file_of(source: Source) -> str:
    """What a row names for an unlocked source: the file, or the index project page's name."""
    return source.location.rstrip("/").rsplit("/", 1)[-1]


def unpinned_text(package: str, source: Source) -> str:
    return (f"{package}: {source.location} has no sha256 (in the recipe or variants/{LOCK_FILE}): "
            f"run `{LOCK_COMMAND}`")
