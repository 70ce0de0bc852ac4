"""Shared channels as a build cache (`build-all --cache-channel URL`, or `cache_channels` in orchestrate.toml).

A lookup reads the channel's lookup entries once (lookup.py: input hash -> package file), then downloads
only the one package whose input hash matches. Before it enters the local channel the package must
match, byte for byte, the sha256 in the remote index and in the manifest, and the input hash recorded
inside it (about.json extra.orchestrate.input_hash); anything else is an error that names the package
and the channel, and the download is deleted.

A reader who names trusted keys (`trusted_keys`, `--trusted-key`; signing.py) takes only a package whose
record (file, sha256, size, input hash) a trusted key signed: its signature is read before the download, and
the download must be the bytes signed. And a hit may hold only the link and activation scripts its local recipe
declares (link_scripts.py). A package refused for either is named in a warning and built here instead.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from .. import web
from ..architectures import ArchitectureTable
from ..channel import ManifestEntry, read_provenance, sha256_of
from ..errors import UserError
from ..options import Options, load_config
from ..recipes import Output
from ..ui import Reporter
from .bench import Bench, recorded_in
from .link_scripts import scripts_in, undeclared
from .lookup import read_index, read_lookup
from .publish import remote_sha256s
from .signing import PublicKey, judge, plain_http_risk, trusted_keys
from .store import FolderStore
from .targets import Store, reader_for
from .untrusted import Refused, why_of

DOWNLOADS = "from-cache"
INDEX = "noarch/repodata.json"  # every channel has it, even one without noarch packages


class RemoteCache:
    def __init__(self, url: str, store: Store, reporter: Reporter, known: list[str] | None = None,
                 keys: list[PublicKey] | None = None):
        """`known`: the architecture table's names; what the channel holds is checked against them. `keys`: the
        keys a hit must be signed by (none: signatures are not asked for)."""
        url = self.description = web.shown_url(url)  # what is printed and recorded: no /t/<token>/ or user:password@
        self.store = store
        self.keys = keys or []
        require_channel(url, store)
        self.known = known
        self.reporter = reporter
        lookup = read_lookup(store, known)  # a few small reads per run; also proves the channel is reachable
        for relpath, why in lookup.refused:  # planted, damaged, or from another orchestrator version
            reporter.error(f"warning: cache channel {url}: {why}; that entry is skipped (`orchestrate verify --from "
                           f"{url}` lists every such file)")
        if not lookup.entries:
            reporter.line(f"cache channel {url} has no build-cache lookup entries: it gives no cache hits "
                          "(publish to it with `orchestrate publish` to fill it)")
        self._by_hash: dict[str, ManifestEntry] = {}
        for file in sorted(lookup.entries):
            entry = lookup.entry(file)
            self._by_hash.setdefault(entry.input_hash, entry)
        self._listed: dict[str, str] | None = None
        self._sizes: dict[str, int] = {}

    def listed(self) -> dict[str, str]:
        if self._listed is None:
            self._listed = remote_sha256s(self.store)
            records, _damaged = read_index(self.store)  # remote_sha256s refused a damaged one
            self._sizes = {file: r["size"] for file, r in records.items() if isinstance(r.get("size"), int)}
        return self._listed

    def fetch(self, output: Output, into: Path) -> tuple[Path, ManifestEntry] | None:
        entry = self._by_hash.get(output.input_hash)
        if entry is None or entry.name != output.name:
            return None
        indexed_sha = self.listed().get(entry.file)
        if indexed_sha is None:
            return None  # in the manifest but not (yet) in the index: not published, so not a hit
        if self.keys:  # before the download: an unsigned package is not fetched at all
            verdict = judge(self.store, entry.file, self.keys, indexed_sha, input_hash=output.input_hash)
            if not verdict.ok:
                self._refuse(entry.file, verdict.problem)
                return None
        subdir, filename = entry.file.split("/", 1)
        folder = into / DOWNLOADS / subdir
        folder.mkdir(parents=True, exist_ok=True)
        package = folder / filename
        partial = folder / f".partial-{filename}"  # keeps the .conda suffix the archive reader goes by
        try:
            try:
                # no more than the index lists (a07/a08); an index without sizes: no more than the manifest's
                self.store.download(entry.file, partial, self._sizes.get(entry.file, entry.package_bytes or None))
            except Refused as exc:  # a symlink or FIFO planted in the package's place
                raise UserError(f"{entry.file} in cache channel {self.description} is refused ({why_of(exc, entry.file)}): "
                                "remove it there and re-publish, or drop that --cache-channel") from None
            self._verify(partial, entry, indexed_sha, output)
            scripts = undeclared(scripts_in(partial), output.recipe_path.parent)
            if scripts:
                self._refuse(entry.file, f"it holds {', '.join(scripts[:4])}, which its recipe "
                             f"{output.recipe_path.parent.name} does not make: a script that would run in this "
                             "build's environments, added after the package was built")
                return None
            partial.replace(package)
        finally:
            partial.unlink(missing_ok=True)
        return package, replace(entry, source=self.description)

    def _refuse(self, file: str, why: str) -> None:
        self.reporter.error(f"warning: not taking {file} from cache channel {self.description}: {why}; building it "
                            f"here instead (`orchestrate verify --from {self.description}` checks the channel)")

    def benchmarks(self, file: str) -> list[Bench]:
        """A store that cannot list (HTTP) gives none: its records cannot be found."""
        return recorded_in(self.store, file, self.known, self.reporter.error)

    def _verify(self, package: Path, entry: ManifestEntry, indexed_sha: str, output: Output) -> None:
        actual = sha256_of(package)
        if actual != indexed_sha or actual != entry.sha256:
            raise UserError(
                f"{entry.file} in cache channel {self.description} does not match the channel's index "
                f"(sha256 {actual[:12]}…, index says {indexed_sha[:12]}…, manifest {entry.sha256[:12]}…): "
                "it is corrupt or was replaced; remove it there and re-publish, or drop that --cache-channel"
            )
        recorded = read_provenance(package).get("input_hash")
        if recorded != output.input_hash:
            raise UserError(
                f"{entry.file} in cache channel {self.description} was built from other inputs than its manifest "
                f"says (input hash {str(recorded)[:12]}…, expected {output.input_hash[:12]}…): "
                "remove it there and re-publish, or drop that --cache-channel"
            )


DROP = "or drop that --cache-channel (or its cache_channels entry in orchestrate.toml)"


def require_channel(url: str, store: Store) -> None:
    """A cache channel that is not there (an unmounted share, a mistyped bucket) would silently turn into a full
    rebuild, hours of it: refused before anything is built."""
    if isinstance(store, FolderStore) and not store.path.is_dir():
        raise UserError(f"cache channel {url}: folder {store.path} does not exist (a share not mounted?): mount it "
                        f"or fix the URL, {DROP}")
    try:
        there = store.size(INDEX)  # a HEAD where the store has one: the index itself is read later, if needed
    except Refused as exc:  # a symlink (noarch/ or the index itself), a FIFO, ... planted in place of the index
        raise UserError(f"cache channel {url}: {exc}: remove that there (`orchestrate verify --from {url}` names every "
                        f"such file) and publish to it again, {DROP}") from None
    if there is None:
        raise UserError(f"cache channel {url} is not a channel (no {INDEX} there): fix the URL, fill it with "
                        f"`orchestrate publish --to {url}`, {DROP}")


def caches_for(options: Options) -> list[RemoteCache]:
    reporter = Reporter(quiet=options.quiet)
    config = load_config(options.workspace)
    known = ArchitectureTable.load(options.variants_dir).names() if options.cache_channels else None
    keys = trusted_keys(options.trusted_keys, "trusted_keys (orchestrate.toml, --trusted-key)")
    for url in options.cache_channels:
        if risk := plain_http_risk(url, bool(keys)):
            reporter.error(f"warning: cache channel {risk}")
    return [_cache(url, config, reporter, known, keys) for url in options.cache_channels]


def _cache(url: str, config: dict, reporter: Reporter, known: list[str] | None,
           keys: list[PublicKey] | None = None) -> RemoteCache:
    """The cache channel, or one line that names it: a server that does not answer, credentials refused or missing
    say which cache channel they are about, as a missing folder does."""
    try:
        return RemoteCache(url, reader_for(url, config), reporter, known, keys)
    except UserError as exc:
        url, said = web.shown_url(url), web.redact_urls(str(exc))
        raise UserError(said if said.startswith(f"cache channel {url}") else f"cache channel {url}: {said}, {DROP}"
                        ) from None
