"""Whether a package file in a shared channel is one rattler's indexer can take, checked before indexing (store.py's
`set_aside_unreadable`): one junk file, an oversized or a sparse one, stopped every later publish or made it run
out of memory under the lock (attacks a04 and a05 of issue 37)."""
from __future__ import annotations

import io
import os
import tempfile
import zipfile

def archive_problem(file, relpath: str) -> str | None:
    """Why the package file `relpath` (open as `file`, a seekable binary file) is no archive that rattler's indexer
    can read (it panics on a .conda that is no zip: one junk file would stop every publish), or None. Reads the
    zip's directory at the end of the file, not the file."""
    if relpath.endswith(".tar.bz2"):
        if file.read(3) != b"BZh":
            return "not a bzip2 archive"
    else:
        try:
            with zipfile.ZipFile(file) as archive:
                names = archive.namelist()
        except (zipfile.BadZipFile, OSError, ValueError, EOFError, NotImplementedError) as exc:
            return f"not a zip archive ({' '.join(str(exc).split())[:80]})"
        if not any(n.startswith("info-") and n.endswith(".tar.zst") for n in names):
            return "a zip without the info-*.tar.zst of a .conda package"
    return _index_json_problem(file, relpath)


def _index_json_problem(file, relpath: str) -> str | None:
    """Why rattler cannot read the package's info/index.json (which its indexer needs: a bzip2 stream or a zip
    member of junk stopped every later publish with "No index.json found", naming no file), or None. Read through
    the open descriptor (/proc/self/fd: nothing swapped since can be read instead); a file without one (S3's
    ranged reads) is left to the indexer."""
    import asyncio

    from rattler.package_streaming import PackageArchive

    try:
        fd = file.fileno()
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):
        return None
    if not os.path.exists(f"/proc/self/fd/{fd}"):
        return None

    async def read(path: str):
        archive = await PackageArchive.from_path(path)
        return await archive.index_json()

    with tempfile.TemporaryDirectory(prefix="orchestrate-archive-") as scratch:
        named = os.path.join(scratch, "package" + (".tar.bz2" if relpath.endswith(".tar.bz2") else ".conda"))
        os.symlink(f"/proc/self/fd/{fd}", named)  # rattler tells the format by the name's suffix
        try:
            asyncio.run(read(named))
        except Exception as exc:  # py-rattler raises plain exceptions with the Rust error text
            return f"no package rattler can read (its info/index.json: {' '.join(str(exc).split())[:80]})"
    return None


SPARSE_MIN_BYTES = 1 << 20  # smaller files are not judged by their blocks (a filesystem may pack tails)


def size_problem(file, relpath: str, limit: int) -> str | None:
    """Why package file `relpath` (open as `file`) is too large to index, or None: over `limit` bytes, or sparse
    (rattler's indexer reads a new package whole into memory: an 8 GiB sparse .conda, 4 KiB on disk, made a
    publish run out of memory under the lock; a compressed package has no holes)."""
    try:
        found = os.fstat(file.fileno())
        size, on_disk = found.st_size, found.st_blocks * 512
    except (OSError, AttributeError, ValueError, io.UnsupportedOperation):  # no file descriptor: S3's ranged reads
        size, on_disk = file.seek(0, os.SEEK_END), None
        file.seek(0)
    if size > limit:
        return (f"{size} bytes, over the {limit} bytes a package may be (max_package_gib in orchestrate.toml raises "
                "it)")
    if on_disk is not None and size >= SPARSE_MIN_BYTES and on_disk < size // 2:
        return f"a sparse file ({size} bytes long, {on_disk} on disk): no package has holes"
    return None
