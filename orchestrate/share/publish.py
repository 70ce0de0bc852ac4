"""`orchestrate publish --to TARGET [PKG...]`: copy what the local channel holds to a shared one.

Order, so that a reader never sees half a publish: upload the packages, then index, then write the
merged orchestrate-manifest.json (the build cache's lookup table) last. If an upload fails, the packages
this run uploaded are removed again and neither the index nor the manifest is touched, so the remote
index never lists a package whose upload failed.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field

from .. import stops
from ..channel import MANIFEST, SUBDIRS, Channel, ManifestEntry
from ..errors import UserError
from ..options import Options
from ..ui import Reporter
from .targets import PackageServer, Store, parse_target


@dataclass
class PublishPlan:
    to_upload: list[ManifestEntry] = field(default_factory=list)
    already_there: list[ManifestEntry] = field(default_factory=list)


def select_entries(channel: Channel, arch: str | None, packages: list[str]) -> list[ManifestEntry]:
    entries = channel.entries_present()
    if arch:
        entries = [e for e in entries if e.arch in (arch, "noarch")]
    if packages:
        unknown = sorted(set(packages) - {e.name for e in entries})
        if unknown:
            where = f" for {arch}" if arch else ""
            raise UserError(f"{', '.join(unknown)} not in channel {channel.path}{where}: build it first or "
                            "check the name with `orchestrate list`")
        entries = [e for e in entries if e.name in packages]
    if not entries:
        raise UserError(f"channel {channel.path} has nothing to publish{f' for {arch}' if arch else ''}: "
                        "run `orchestrate build-all` first")
    return sorted(entries, key=lambda e: e.file)


def remote_sha256s(store) -> dict[str, str]:
    """subdir/file -> sha256 for every package the remote index lists."""
    listed = {}
    for subdir in SUBDIRS:
        raw = store.read(f"{subdir}/repodata.json")
        if raw is None:
            continue
        try:
            data = json.loads(raw)
        except json.JSONDecodeError:
            raise UserError(f"{store.url}/{subdir}/repodata.json is damaged: re-index the channel") from None
        for key in ("packages", "packages.conda"):
            for name, record in (data.get(key) or {}).items():
                listed[f"{subdir}/{name}"] = record.get("sha256", "")
    return listed


def remote_manifest(store) -> dict[str, dict]:
    raw = store.read(MANIFEST)
    if raw is None:
        return {}
    try:
        return dict(json.loads(raw)["packages"])
    except (json.JSONDecodeError, KeyError, TypeError):
        raise UserError(f"{store.url}/{MANIFEST} is damaged: remove it and publish again") from None


def plan_publish(entries: list[ManifestEntry], listed: dict[str, str], target_url: str) -> PublishPlan:
    plan = PublishPlan()
    for entry in entries:
        remote = listed.get(entry.file)
        if remote is None:
            plan.to_upload.append(entry)
        elif remote == entry.sha256:
            plan.already_there.append(entry)
        else:
            raise UserError(
                f"{target_url} already has {entry.file} with different content (sha256 {remote[:12]}…, ours "
                f"{entry.sha256[:12]}…): a package file is never overwritten; remove it there or bump build_number"
            )
    return plan


def publish(options: Options, target_url: str, packages: list[str], reporter: Reporter,
            s3_flags: dict | None = None) -> int:
    from ..options import load_config

    channel = Channel(options.channel)
    channel.validate()
    if not channel.is_channel():
        raise UserError(f"channel {channel.path} is empty: run `orchestrate build-all` first")
    target = parse_target(target_url, load_config(options.workspace), **(s3_flags or {}))
    stops.describe(lambda: f"{target.url}'s index lists only what was indexed whole",
                   "run the same command again to publish the rest")
    channel.lock(f"orchestrate publish --to {target.url}")
    try:
        entries = select_entries(channel, options.arch, packages)
        if isinstance(target, PackageServer):
            return _publish_to_server(channel, entries, target, reporter)
        if not target.writable:
            raise UserError(f"{target.url} is read-only over HTTP: publish to the folder or bucket behind it")
        return _publish_to_store(channel, entries, target, reporter)
    finally:
        channel.unlock()


def _publish_to_store(channel: Channel, entries: list[ManifestEntry], store: Store, reporter: Reporter) -> int:
    store.check()
    plan = plan_publish(entries, remote_sha256s(store), store.url)
    manifest = remote_manifest(store)
    missing_from_manifest = [e for e in entries if e.file not in manifest]
    if not plan.to_upload and not missing_from_manifest:
        reporter.line(f"nothing to publish: all {len(entries)} package(s) are already at {store.url}")
        return 0
    uploaded: list[str] = []
    try:
        for entry in plan.to_upload:
            reporter.info(f"uploading {entry.file}")
            store.put(channel.path / entry.file, entry.file)
            uploaded.append(entry.file)
        if plan.to_upload:
            store.index()
    except BaseException:
        _withdraw(store, uploaded, reporter)
        raise
    # The manifest is merged, never replaced: entries other machines published stay.
    for entry in entries:
        manifest[entry.file] = vars(entry)
    store.put_bytes(json.dumps({"packages": dict(sorted(manifest.items()))}, indent=1, sort_keys=True).encode(),
                    MANIFEST)
    reporter.line(f"published {len(plan.to_upload)} package(s) to {store.url}"
                  + (f"; {len(plan.already_there)} already there" if plan.already_there else ""))
    return 0


def _withdraw(store: Store, uploaded: list[str], reporter: Reporter) -> None:
    """Take back what this run uploaded; the index was not updated, so nothing ever listed them."""
    for relpath in uploaded:
        try:
            store.delete(relpath)
        except UserError as exc:
            reporter.error(f"could not remove {relpath} after the failure ({exc}); it is not in the index")


def _publish_to_server(channel: Channel, entries: list[ManifestEntry], server: PackageServer,
                       reporter: Reporter) -> int:
    reader = server.reader()
    try:
        listed = remote_sha256s(reader)
    except UserError:
        listed = {}  # a new or private channel may not be readable yet; the server itself skips duplicates
    plan = plan_publish(entries, listed, server.url)
    if not plan.to_upload:
        reporter.line(f"nothing to publish: all {len(entries)} package(s) are already at {server.url}")
        return 0
    server.upload([channel.path / e.file for e in plan.to_upload])
    reporter.line(f"published {len(plan.to_upload)} package(s) to {server.url}; {server.kind} indexes them itself. "
                  "Package servers hold no orchestrate-manifest.json, so they serve installs, not build-cache hits")
    return 0
