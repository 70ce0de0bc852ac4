"""`pins --bump --write`: apply a group's moves to the files they live in, and nothing else.

Each group is staged in memory first: every checksum downloaded or read from the index that publishes it,
the prebuilt lock recomputed from AMD's index. If anything of it fails (a download, a missing checksum, a
file that no longer holds the old value), the group is held with the reason and none of it is written.
Files are edited line by line, values only, so their comments stay; the run's files are replaced together
(`replace_all`: all or none). A second run finds the pins current and changes nothing.
"""
from __future__ import annotations

import datetime
import hashlib
import os
import re
import shutil
import tempfile
import zipfile
from pathlib import Path

import yaml

from .. import prebuilt as amd
from .. import package_index, stops, web
from ..architectures import ArchitectureTable
from ..errors import UserError
from ..pypi import WHEEL_BOUND, checked_entry, choose_file, entry_for, with_entry
from ..pypi_table import SHA256, load_table
from .decide import HELD, UNKNOWN, Download, Edit, Group
from ..release_files import ReadError, World
from ..grammar import NotGrammar, checked_pin
from ..options import workspace_source_cache
from ..sources import SourceCache
from ..upstreams import Upstreams, declared_tags

COMMIT = re.compile(r"[0-9a-f]{40}")


class NotWritten(Exception):
    """Why a group could not be written (its rows say it)."""


def apply(workspace: Path, groups: list[Group], world: World) -> list[Path]:
    """Write every group that moves and can be staged whole; the files written."""
    originals: dict[Path, str] = {}
    texts: dict[Path, str] = {}
    tags = declared_tags(Upstreams.load(workspace / "variants")) if (workspace / "variants/upstreams.yaml").is_file() else []
    for group in groups:
        if not group.moving() or not group.edits:
            continue
        staged = dict(texts)
        try:
            for edit in group.edits:  # every value read from upstream matches its grammar before anything is staged
                _check_grammar(edit, group, tags)
            for edit in sorted(group.edits, key=lambda e: e.kind == "lock"):
                path = workspace / (edit.target if edit.kind in ("literal", "lock") else
                                    "variants/shared.yaml" if edit.kind == "shared" else "variants/pypi.yaml")
                if path not in staged:
                    originals[path] = path.read_text()
                    staged[path] = originals[path]
                staged[path] = _edited(staged, path, edit, workspace, world)
        except (ReadError, NotWritten) as exc:
            name = group.name or group.rows[0].name
            group.hold_all(f"{exc}; nothing of the {name} {'group' if group.name else 'pin'} was written",
                           UNKNOWN if getattr(exc, "unreachable", False) else HELD)
            continue
        changed = sorted(str(p.relative_to(workspace)) for p in staged if staged[p] != texts.get(p, originals[p]))
        texts = staged
        for row in group.moving():
            row.files = changed
    changed = {path: text for path, text in texts.items() if text != originals[path]}
    replace_all(changed, last=workspace / "variants" / "shared.yaml")
    return list(changed)


def _check_grammar(edit: Edit, group: Group, tags: list) -> None:
    """NotWritten, naming the value and what read it, unless the new value of a `shared`, `literal` or `pypi` edit is
    a version, a declared tag, a full commit or a sha256 (a Download's sha256 is computed here, not read). A literal
    that carries its value in a frame (`aiter_tag: v0.1.11`, `+git<commit>.`) has the value checked where the frame
    is a `KEY: ` or the old text a bare pin, and otherwise holds only the characters a pin has, so no template,
    quote, comment or line break reaches the file."""
    if edit.kind not in ("shared", "literal", "pypi") or isinstance(edit.new, Download):
        return
    new, source = str(edit.new), f"upstream, for {group.name or group.rows[0].name}'s {edit.target}"
    key = re.match(r"(\w+): ", edit.old) if edit.kind == "literal" else None
    framed = edit.kind == "literal" and not key and not checked_pin_or_none(edit.old)
    if key and new.startswith(key.group(0)):  # the value after the key, as the file has it
        new = new[len(key.group(0)):]
    try:
        if framed and not FRAMED_TEXT.fullmatch(new):
            raise NotGrammar(f"{source} gave {new[:100]!r}, which holds characters no pin has: refused, nothing written")
        if not framed:
            checked_pin(new, source, tags)
    except NotGrammar as exc:
        raise NotWritten(str(exc)) from None


FRAMED_TEXT = re.compile(r"[A-Za-z0-9._+:/@ -]{1,200}")


def checked_pin_or_none(text: str) -> str | None:
    try:
        return checked_pin(text, "")
    except NotGrammar:
        return None


def replace_all(texts: dict[Path, str], last: Path) -> None:
    """Write every file of a run, or none: all temporary files first (a full disk or a Ctrl-C there changes
    nothing), then one tight loop of renames inside a critical zone (a stop waits for its end), and any
    failure of a rename puts back every file already replaced. `last` goes last: variants/shared.yaml is
    what the next run's decisions read, so a run that dies anyway leaves it naming the old pins."""
    order = sorted(texts, key=lambda path: path == last)
    temporary: dict[Path, str] = {}
    backups: dict[Path, str] = {}
    replaced: list[Path] = []
    try:
        for path in order:
            temporary[path] = _temporary(path, texts[path])
            if path.exists():  # a copy of the original beside it: putting it back is a rename, never a write
                backups[path] = _temporary(path, None)
                shutil.copy2(path, backups[path])
        with stops.zone(stops.CRITICAL):
            try:
                for path in order:
                    os.replace(temporary[path], path)
                    replaced.append(path)
            except BaseException:
                for path in reversed(replaced):
                    if path in backups:
                        os.replace(backups.pop(path), path)
                    else:
                        path.unlink()
                raise
    finally:
        for name in [*temporary.values(), *backups.values()]:
            Path(name).unlink(missing_ok=True)


def _temporary(path: Path, text: str | None) -> str:
    """A new file beside `path` (same folder, so a rename replaces it atomically) with `text` and path's mode."""
    handle, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w") as out:
            if text is not None:
                out.write(text)
        os.chmod(name, path.stat().st_mode & 0o777 if path.exists() else 0o644)
    except BaseException:
        Path(name).unlink(missing_ok=True)
        raise
    return name


def atomic_write(path: Path, text: str) -> None:
    replace_all({path: text}, last=path)


def stale_evidence(workspace: Path, groups: list[Group], recipes: dict[str, str | None]) -> None:
    """Fill each written move's `evidence`: the comment lines of the files written that still name its old
    version, or the old commit of its recipe. --write keeps comments (they are the evidence for a pin), so
    after a move they describe the old release; the reviewer rewrites exactly these lines."""
    for group in groups:
        for row in group.moving():
            if not row.files:
                continue
            recipe_file = f"recipes/{recipes.get(row.name)}/recipe.yaml"
            commits = [e.old[:8] for e in group.edits if e.kind == "literal" and e.target == recipe_file
                       and COMMIT.fullmatch(e.old)]
            needles = [re.compile(rf"(?<![\d.]){re.escape(row.pinned)}(?!\d|\.\d)")] + \
                      [re.compile(rf"(?<![0-9a-f]){c}") for c in commits]
            for name in row.files:
                for number, line in enumerate((workspace / name).read_text().splitlines(), 1):
                    comment = _comment(line)
                    if comment and any(n.search(comment) for n in needles):
                        row.evidence.append(f"{name}:{number}: {comment}")


def _comment(line: str) -> str:
    """The comment of a YAML line ('' without one); a '#' inside a value (a URL's fragment) is not one."""
    found = re.search(r"(?:^|\s)(#.*)$", line)
    return found.group(1).strip() if found else ""


def _edited(staged: dict[Path, str], path: Path, edit: Edit, workspace: Path, world: World) -> str:
    text = staged[path]
    if edit.kind == "shared":
        return shared_pin(text, edit.target, str(edit.new), path)
    if edit.kind == "literal":
        where = path.relative_to(workspace)
        if not edit.old.strip() or edit.old != edit.old.strip() or edit.old.endswith((":", "=")):
            # the old text is built from what was read (`aiter_tag: {tag}`): a part that could not be read
            # leaves it open-ended, and it would then match the start of any value (`aiter_tag: NEWv0.1.11`)
            raise NotWritten(f"{where}: the old value {edit.old!r} has an empty part (it could not be read): "
                             "move it by hand")
        new = edit.new
        if isinstance(new, Download):
            if not new.url:
                raise NotWritten("the index publishes no sha256 for the new source (a checksum is missing)")
            new = world.sha256_of(new.url)
        edited = _values_replaced(text, edit.old, str(new))
        if edited is None:
            raise NotWritten(f"{where} does not hold {edit.old[:16]}: move it by hand")
        return edited
    if edit.kind == "pypi":
        return _pypi_entry(text, edit.target, str(edit.new), workspace, world)
    if edit.kind == "lock":
        return _lock(staged, workspace, world)
    raise ValueError(edit.kind)


def _values_replaced(text: str, old: str, new: str) -> str | None:
    """`old` -> `new` where it is a whole value of a line, never in a comment (None: nowhere). Comments keep
    the old pin because they are its evidence: `stale_evidence` lists them for the reviewer to rewrite, and
    a comment rewritten to a new commit or checksum would claim evidence nobody read."""
    value_char = re.compile(r"\w")
    whole = re.compile((r"(?<!\w)" if value_char.match(old[0]) else "") + re.escape(old) +
                       (r"(?!\w)" if value_char.match(old[-1]) else ""))
    lines, found = text.splitlines(keepends=True), False
    for number, line in enumerate(lines):
        comment = re.search(r"(?:^|\s)#", line)
        end = comment.start() if comment else len(line)
        value, count = whole.subn(lambda _: new, line[:end])
        if count:
            lines[number], found = value + line[end:], True
    return "".join(lines) if found else None


def shared_pin(text: str, key: str, value: str, path: Path) -> str:
    """`KEY: ["old"]  # comment` with the new value, quoting and comment kept."""
    pattern = re.compile(rf'^({re.escape(key)}:\s*\[?\s*["\']?)([^"\'\]\s#,]+)(["\']?\s*\]?)', re.M)
    if not pattern.search(text):
        raise NotWritten(f"{path.name} has no single-value line for {key}: move it by hand")
    return pattern.sub(lambda m: m.group(1) + value + m.group(3), text, count=1)


def _pypi_entry(text: str, entry: str, version: str, workspace: Path, world: World) -> str:
    variants = workspace / "variants"
    table = load_table(variants)
    previous = table.entries.get(entry)
    if previous is None:
        raise NotWritten(f"variants/pypi.yaml has no entry {entry}")
    shared = yaml.safe_load((variants / "shared.yaml").read_text()) or {}
    python = str((shared.get("python") or ["3.12"])[0])
    files = world.files(previous.pypi, version)
    try:
        chosen, noarch = choose_file(files, python)
    except LookupError as exc:
        raise NotWritten(f"{previous.pypi} {version}: {exc}") from None
    expected = str((chosen.get("digests") or {}).get("sha256") or "")
    if not SHA256.match(expected):
        raise NotWritten(f"PyPI publishes no sha256 for {chosen['filename']} (a checksum is missing)")
    wheel = world.download(chosen["url"], web.listed_size(chosen, WHEEL_BOUND))
    if hashlib.sha256(wheel).hexdigest() != expected:
        raise NotWritten(f"{chosen['filename']} does not match PyPI's sha256 {expected[:12]}…")
    try:
        new = entry_for(previous.pypi, version, chosen["filename"], chosen["url"], expected, wheel, noarch, previous,
                        python, table, f"sha256 from PyPI JSON ({world.pypi_url}/{previous.pypi}/json), checked against "
                                       f"the download by `orchestrate pins --bump --write`, {datetime.date.today()}")
    except (LookupError, zipfile.BadZipFile) as exc:
        raise NotWritten(f"{chosen['filename']} is not a usable wheel ({exc})") from None
    try:
        checked_entry(new, world.pypi_url, f"{world.pypi_url}/{previous.pypi}/json")
    except NotGrammar as exc:
        raise NotWritten(str(exc)) from None
    return with_entry(text, entry, {k: v for k, v in new.items() if v != "" or k in ("depends", "imports")})


def _lock(staged: dict[Path, str], workspace: Path, world: World) -> str:
    """variants/prebuilt-lock.yaml for the staged pins, from the sha256 AMD's index publishes (`pins --lock`)."""
    variants = workspace / "variants"
    with tempfile.TemporaryDirectory() as folder:
        scratch = Path(folder)
        for name in (amd.PREBUILT_FILE, amd.LOCK_FILE):
            source = variants / name
            text = staged.get(source, source.read_text() if source.is_file() else None)
            if text is not None:
                (scratch / name).write_text(text)
        prebuilt = amd.Prebuilt.load(scratch)
        if prebuilt is None:
            raise NotWritten(f"variants/{amd.PREBUILT_FILE} does not exist")
        # the index the decisions read ($ORCHESTRATE_AMD_INDEX first), through the pages they already read;
        # the lock names it, so a lock read from another index than prebuilt.yaml's is not used by builds
        prebuilt.index = package_index.with_slash(world.amd_index)
        table = ArchitectureTable.load(variants)
        shared = yaml.safe_load(staged.get(variants / "shared.yaml", (variants / "shared.yaml").read_text())) or {}
        try:
            # a file the index lists without a hash is downloaded once into the source cache, as `pins --lock` does
            result = amd.lock(prebuilt, table.names(), lambda arch: {**shared, **table.get(arch).variant_keys()},
                              world.timeout, read=world.amd_files, download=amd.downloader(
                                  SourceCache(workspace_source_cache(workspace)), world.timeout, lambda line: None))
        except ReadError as exc:  # an unreachable index stays unreachable: apply() makes the group unknown
            raise ReadError(f"the prebuilt lock could not be written: {exc}", exc.unreachable) from None
        except UserError as exc:
            raise NotWritten(f"the prebuilt lock could not be written: {exc}") from None
        if result.problems:
            raise NotWritten(f"the prebuilt lock could not be written: {result.problems[0]}")
        return amd.write_lock(prebuilt, result, table.names()).read_text()
