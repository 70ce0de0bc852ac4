"""Whether two package files hold the same files: what `publish` asks before it keeps a channel's copy of one of
our packages that it cannot trust by a signature (a claimed input hash proves nothing: attack a14 of issue 37).

Both are unpacked (rattler's own extractor, which refuses `..` and links out of the folder) and every file is
hashed: the payload and info/ alike, except what a build records about itself and that differs between two
builds of the same inputs: info/about.json, info/recipe/, info/hash_input.json, and index.json's timestamp.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

BUILD_RECORDS = ("info/about.json", "info/hash_input.json", "info/recipe/", "info/licenses/")


def _digests(root: Path) -> dict[str, str]:
    found = {}
    for folder, folders, files in os.walk(root):
        for name in files + [f for f in folders if os.path.islink(os.path.join(folder, f))]:
            path = os.path.join(folder, name)
            relpath = os.path.relpath(path, root).replace(os.sep, "/")
            if relpath.startswith(BUILD_RECORDS):
                continue
            if os.path.islink(path):
                found[relpath] = "link:" + os.readlink(path)
            elif relpath == "info/index.json":
                index = json.loads(Path(path).read_text(encoding="utf-8"))
                index.pop("timestamp", None)
                found[relpath] = json.dumps(index, sort_keys=True)
            else:
                with open(path, "rb") as file:
                    found[relpath] = hashlib.file_digest(file, "sha256").hexdigest()
    return found


def same_files(ours: Path, theirs: Path) -> bool:
    """Whether package files `ours` and `theirs` hold the same files, byte for byte (see the module's note);
    False for one that cannot be unpacked."""
    from rattler.package_streaming import extract

    with tempfile.TemporaryDirectory(prefix="orchestrate-same-files-") as scratch:
        trees = []
        for number, package in enumerate((ours, theirs)):
            tree = Path(scratch) / str(number)
            try:
                extract(package, tree)
                trees.append(_digests(tree))
            except Exception:  # py-rattler raises plain exceptions: an archive that does not unpack is no match
                return False
        return trees[0] == trees[1]
