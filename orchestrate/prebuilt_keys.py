"""STAND-IN (helper h5b) for the orchestrator's prebuilt-artifact keys, until h6's implementation replaces it.

Interface (DESIGN.md, issue 15.3): for the architecture being planned, every artifact KEY declared in
variants/prebuilt.yaml gives two variant keys, KEY_url and KEY_sha256, from variants/prebuilt-lock.yaml;
an unlocked artifact gets the index's project page and "" (which the runner refuses to download). An
artifact with `when: KEY` is declared only where that variant key is not empty.
"""
from __future__ import annotations

from pathlib import Path

import yaml

DECLARATIONS = "prebuilt.yaml"
LOCK = "prebuilt-lock.yaml"


def prebuilt_variant_keys(variants_dir: Path, values: dict) -> dict[str, str]:
    declared_file = variants_dir / DECLARATIONS
    if not declared_file.is_file():
        return {}
    declared = yaml.safe_load(declared_file.read_text()) or {}
    lock_file = variants_dir / LOCK
    lock = (yaml.safe_load(lock_file.read_text()) or {}).get("artifacts", {}) if lock_file.is_file() else {}
    one = {k: str(v[0]) if isinstance(v, list) and v else str(v) for k, v in values.items()}
    keys: dict[str, str] = {}
    for key, spec in (declared.get("artifacts") or {}).items():
        if spec.get("when") and not one.get(spec["when"]):
            continue
        try:
            project = spec["project"].format(**one)
        except KeyError:
            continue  # a variant key this workspace does not define
        entry = lock.get(key) or {}
        if spec.get("per_arch"):
            entry = entry.get(one.get("gpu_arch", ""), {}) if isinstance(entry, dict) else {}
        keys[f"{key}_url"] = entry.get("url") or f"{declared['index']}{project}/"
        keys[f"{key}_sha256"] = entry.get("sha256") or ""
    return keys
