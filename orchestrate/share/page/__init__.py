"""The channel's page (index.html) and its data (channel-page.json). A placeholder with the agreed signature
until the page itself lands (issue 26, branch page-render), which replaces this module."""
from __future__ import annotations

import html
import json

from ..store import Store
from ...architectures import ArchitectureTable

SUBDIRS = ("noarch", "linux-64")


def build_page(store: Store, table: ArchitectureTable, *, channel_url: str | None, generated: str) -> dict[str, bytes]:
    archs = sorted({path.split("/")[1] for path in store.list("bench") or [] if path.count("/") == 2})
    packages = []
    for subdir in SUBDIRS:
        try:
            index = json.loads(store.read(f"{subdir}/repodata.json") or b"{}")
        except ValueError:
            continue
        packages += sorted(f"{subdir}/{name}" for key in ("packages", "packages.conda")
                           for name in (index.get(key) or {}))
    data = {"generated": generated, "channel_url": channel_url, "architectures": archs, "packages": packages}
    items = "".join(f"<li>{html.escape(a)}</li>" for a in archs)
    page = (f"<!doctype html><html><head><meta charset='utf-8'><title>Channel</title></head><body>"
            f"<h1>Channel</h1><ul>{items}</ul><p>{len(packages)} package(s)</p></body></html>\n")
    return {"index.html": page.encode(), "channel-page.json": json.dumps(data, indent=1).encode()}
