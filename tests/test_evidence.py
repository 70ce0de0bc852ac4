"""Evidence anyone can follow (issue 19.3).

Every pin, checksum and claim in recipes/, variants/, patches/, docs/ and README.md cites something a maintainer
can open: a public URL (a GitHub file at a commit, an issue, a PyPI page, AMD's documentation or release notes)
or a named document and date, or says "unverified: <what would verify it>". A search index's internal id
("indexed id 70147686591") is none of these: nobody outside that index can open it. And a URL in the recipes and
variants is an https address on a public host, never a path on someone's machine.
"""
from __future__ import annotations

import re
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent

# Where citations live. docs/ is the manual (absent until it lands; then scanned like the rest).
CITING_PATHS = ["recipes", "variants", "patches", "docs", "README.md"]
TEXT_SUFFIXES = {".yaml", ".yml", ".md", ".patch", ".diff", ".sh", ".py", ".toml", ".txt", ".bat", ".cmake"}

# An index-id citation: "indexed id 7…", "index ids", "id 70147686591", "ids 70963733887, 71230805939",
# "(id: 7014…)" (an elided id too), and a bare 9+ digit number within a few words after "id".
INDEX_ID = re.compile(
    r"\bindex(?:ed)?\s+ids?\b"
    r"|\bids?\b[\s:=#(]*(?:\d{6,}|\d+…)"
    r"|\bids?\b[^\n]{0,40}?(?<![\w.\-/])\d{9,}(?![\w.\-/])",
    re.IGNORECASE,
)
# The same with the number wrapped onto the next comment line ("…on 2026-10-08, id\n# 70966310969)").
WRAPPED_INDEX_ID = re.compile(r"\bids?[\s:=#(]*\n[\s#/*\-]*\d{6,}", re.IGNORECASE)

# Hosts whose pages anyone can open. A new public host belongs here (with the reason it is public); a private
# or local one (a build box, localhost, a file:// path) never does.
PUBLIC_HOSTS = {
    "github.com", "raw.githubusercontent.com", "gist.github.com",  # code at a commit, issues, PRs
    "pypi.org", "files.pythonhosted.org",  # PyPI pages and files
    "rocm.docs.amd.com", "repo.radeon.com", "repo.amd.com", "stable.repo.amd.com",  # AMD docs and indexes
    "rocm.nightlies.amd.com",
    "pytorch.org", "download.pytorch.org", "docs.pytorch.org",
    "conda.anaconda.org", "prefix.dev", "conda-forge.org",
}
URL = re.compile(r"\b[a-z][a-z0-9+.\-]*://[^\s\"'`<>)\]]+", re.IGNORECASE)
# Keys whose values are (or carry) the evidence for a pin or a source.
URL_KEYS = {"url", "homepage", "repository", "documentation", "index", "index_url", "release_notes"}
EVIDENCE_KEYS = {"evidence", "source_evidence"}
LOCAL_PATH = re.compile(r"(?:^|[\s(])(?:/home/|/tmp/|/Users/|/mnt/|/work/|~/|\./|file:)")


def citing_files() -> list[Path]:
    files: list[Path] = []
    for name in CITING_PATHS:
        path = ROOT / name
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in TEXT_SUFFIXES)
    return files


def index_id_citations(text: str) -> list[tuple[int, str]]:
    """(line number, line) for every line citing a search-index id instead of a public address."""
    lines = text.splitlines()
    found = {number for number, line in enumerate(lines, 1) if INDEX_ID.search(line)}
    found |= {text.count("\n", 0, match.start()) + 1 for match in WRAPPED_INDEX_ID.finditer(text)}
    return [(number, lines[number - 1].strip()) for number in sorted(found)]


def url_problem(url: str) -> str | None:
    """Why URL is not evidence anyone can open, or None."""
    url = url.rstrip(".,;:")
    parts = urlsplit(url)
    if parts.scheme != "https":
        return f"{url} is not an https URL"
    host = (parts.hostname or "").lower()
    if host not in PUBLIC_HOSTS:
        return (f"{url}: {host or 'no host'} is not a known public host (add it to PUBLIC_HOSTS in "
                "tests/test_evidence.py if anyone can open it)")
    return None


def is_template(value: str) -> bool:
    return "${{" in value or re.search(r"\{[a-z_]+\}", value) is not None


def evidence_values(data, where: str = ""):
    """(where, key, value) for every string under a URL or evidence key, at any depth."""
    if isinstance(data, dict):
        for key, value in data.items():
            here = f"{where}.{key}" if where else str(key)
            if isinstance(value, str) and str(key) in URL_KEYS | EVIDENCE_KEYS:
                yield here, str(key), value
            else:
                yield from evidence_values(value, here)
    elif isinstance(data, list):
        for index, item in enumerate(data):
            yield from evidence_values(item, f"{where}[{index}]")


def evidence_problems(data) -> list[str]:
    problems = []
    for where, key, value in evidence_values(data):
        if not value.strip() or is_template(value):
            continue  # filled in from the lock or the variants, which are checked themselves
        if key in URL_KEYS:
            problem = url_problem(value.strip())
            if problem:
                problems.append(f"{where}: {problem}")
            continue
        if LOCAL_PATH.search(value):
            problems.append(f"{where}: cites a local path ({value[:80]}…); cite a public URL or a named document")
        problems += [f"{where}: {p}" for p in filter(None, (url_problem(u) for u in URL.findall(value)))]
    return problems


def test_scanner_flags_index_id_citations():
    bad = [
        "# installers pin torch from it, indexed ids 70147686591, 70119560753",
        "  # builds bottles from it (indexed id 70162525497).",
        "# a Nix flake pinning 10.1.0a20260822, id 71106408474; a user",
        "  # sha256 as pinned by two build manifests (ids 70963733887, 71230805939).",
        "evidence: search hit (id: 70087912563)",
        "see the index id listed above",
        "  # the survey (id 7…, read 2026-08-28) and id#612345678",
        "# AMD's stable index listing torchvision-0.29.0a0 on 2026-10-08, id",
        "# 70966310969). torch 2.14.0 is what vLLM 0.33.0 requires",
    ]
    good = [
        "  sha256: 0a14655bd32095148d93fa595f93aba45dda0d13b25cc7fe86a041340e4a4862",
        "# https://github.com/Yamz-Labs/kyojin/blob/2efdc4450b8d337bbb1954fb4356feef064180f7/flake.nix",
        "  triton_commit: 675c59878aa2280b31f722aaf42b825fcee21de8",
        "# pytorch#189301 bumped main to 0.13b (2026-07-13), ROCm/pytorch#3627",
        "  build: {number: 0, id: cuda}",
        "27,536 bytes; 776,978,384 B; a valid pid 123456789 is not a citation",
    ]
    # Every line is flagged; the wrapped id is reported on the line that says "id".
    assert [n for n, _ in index_id_citations("\n".join(bad))] == list(range(1, len(bad)))
    assert index_id_citations("see id 7… there") == [(1, "see id 7… there")]  # elided, still an index id
    assert index_id_citations("\n".join(good)) == []


def test_scanner_flags_urls_nobody_can_open():
    data = {
        "source": [{"url": "http://buildbox:8765/pytorch-v2.14.1.tar.gz"}, {"url": "${{ torch_url }}"}],
        "about": {"homepage": "https://pytorch.org"},
        "artifacts": {"rocm": {"url": "https://stable.repo.amd.com/rocm/whl-next/rocm/rocm-10.1.0.tar.gz",
                               "evidence": "measured in /home/me/notes.md, see file:///tmp/x"},
                      "torch": {"evidence": "https://pypi.org/project/torch/2.14.1/ sha256, read 2026-11-25"}},
    }
    problems = evidence_problems(data)
    assert any(p.startswith("source[0].url: http://buildbox:8765") for p in problems), problems
    assert any(p.startswith("artifacts.rocm.evidence: cites a local path") for p in problems), problems
    assert any("file:///tmp/x is not an https URL" in p for p in problems), problems
    assert len(problems) == 3, problems  # the templated url, the homepage and the PyPI evidence are fine


@pytest.mark.parametrize("path", citing_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_citation_is_a_search_index_id(path: Path):
    found = index_id_citations(path.read_text(encoding="utf-8", errors="replace"))
    assert not found, "\n".join(
        f"{path.relative_to(ROOT)}:{number}: cites a search-index id, which nobody can open: {line}\n"
        "  cite a public URL (GitHub file at a commit, PyPI page, AMD docs/release notes) or a named document "
        "and date, or write 'unverified: <what would verify it>'" for number, line in found)


def yaml_files() -> list[Path]:
    return sorted([*(ROOT / "variants").glob("*.yaml"), *(ROOT / "recipes").rglob("*.yaml")])


@pytest.mark.parametrize("path", yaml_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_evidence_and_source_urls_are_public_https(path: Path):
    text = path.read_text(encoding="utf-8")
    problems = evidence_problems(yaml.safe_load(text))
    # Comments cite too: every URL anywhere in the file must be one anyone can open.
    for number, line in enumerate(text.splitlines(), 1):
        problems += [f"line {number}: {p}" for p in filter(None, (url_problem(u) for u in URL.findall(line)))]
    assert not problems, f"{path.relative_to(ROOT)}:\n  " + "\n  ".join(problems)


def test_patch_urls_are_public_https():
    problems = []
    for path in sorted((ROOT / "patches").rglob("*")):
        if path.is_file():
            for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                if line.startswith(("+", "-", " ")) and not line.startswith(("+++", "---")):
                    continue  # the diff body is upstream's code, not our evidence
                problems += [f"{path.relative_to(ROOT)}:{number}: {p}"
                             for p in filter(None, (url_problem(u) for u in URL.findall(line)))]
    assert not problems, "\n".join(problems)


def test_a_regenerated_lock_keeps_hand_evidence_and_cites_no_index_id(tmp_path):
    """`orchestrate pins --lock` rewrites variants/prebuilt-lock.yaml, carrying each hand-seeded entry's
    `evidence:` over verbatim: what it writes back from today's lock must pass the same checks."""
    from orchestrate.prebuilt import LockResult, Prebuilt, write_lock

    shutil.copytree(ROOT / "variants", tmp_path / "variants")
    prebuilt = Prebuilt.load(tmp_path / "variants")
    hand = [e for e in prebuilt.locked.values() if getattr(e, "evidence", "")]
    assert hand, "the lock has no hand-seeded entry with evidence: nothing to check"
    text = write_lock(prebuilt, LockResult(prebuilt.locked, []), archs=[]).read_text()
    written = [e.get("evidence") for e in yaml.safe_load(text)["artifacts"].values() if isinstance(e, dict)]
    assert all(entry.evidence in written for entry in hand)
    assert index_id_citations(text) == []
    assert evidence_problems(yaml.safe_load(text)) == []
