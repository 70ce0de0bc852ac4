"""The front page and the manual: README stays a front page, docs/ builds as a site with `mkdocs build --strict`,
every relative link and #anchor in README.md and docs/ resolves, and every page is in mkdocs.yml's nav."""
from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
README = REPO / "README.md"
MKDOCS_YML = REPO / "mkdocs.yml"
README_MAX_LINES = 200

HAVE_MKDOCS = all(importlib.util.find_spec(name) for name in ("mkdocs", "material"))
NEEDS_MKDOCS = pytest.mark.skipif(
    not HAVE_MKDOCS, reason="mkdocs and mkdocs-material are not installed: pip install -e '.[docs]'"
)

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
# [text](target) and ![alt](target), with an optional "title"
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
EXPLICIT_ID = re.compile(r"\s*\{[^}]*#([\w-]+)[^}]*\}\s*$")


def prose_lines(text: str):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slugify(heading: str) -> str:
    """The id MkDocs' toc extension gives a heading (Python-Markdown's default slugify): the heading's text
    without markup, NFKD-folded to ASCII, punctuation other than - and _ dropped, lowercased, runs of spaces and
    hyphens made one hyphen."""
    text = CODE_SPAN.sub(lambda m: m.group(2), heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link counts by its text
    text = re.sub(r"<[^>]+>", "", text)
    text = re.sub(r"(\*\*|\*)", "", text)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def anchors(path: Path) -> set[str]:
    """Every heading id in a Markdown file: explicit {#id} attributes, else the slug, made unique as toc does
    (a second "x" is "x_1")."""
    found: set[str] = set()
    for _, line in prose_lines(path.read_text()):
        match = HEADING.match(line)
        if not match:
            continue
        title = match.group(2)
        explicit = EXPLICIT_ID.search(title)
        if explicit:
            found.add(explicit.group(1))
            continue
        slug = base = slugify(title)
        counter = 0
        while slug in found:
            counter += 1
            slug = f"{base}_{counter}"
        found.add(slug)
    return found


def broken_links(path: Path, docs_dir: Path | None = None) -> list[str]:
    """One line per relative link or #anchor in `path` that does not resolve. With docs_dir, a link from a page in
    it must stay in it: MkDocs knows only those files, and --strict fails on any other."""
    problems = []
    for number, line in prose_lines(path.read_text()):
        for match in LINK.finditer(CODE_SPAN.sub("code", line)):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I) or target.startswith("/"):
                continue  # a URL (https:, mailto:) or a site-absolute path: not a file here
            file_part, _, anchor = target.partition("#")
            where = f"{path.name}:{number}: {target}"
            resolved = (path.parent / file_part).resolve() if file_part else path.resolve()
            if not resolved.exists():
                problems.append(f"{where}: {file_part} does not exist")
                continue
            if docs_dir is not None and not resolved.is_relative_to(docs_dir.resolve()):
                problems.append(f"{where}: leads out of {docs_dir.name}/ (write it as a code span instead)")
                continue
            if anchor:
                if resolved.suffix != ".md":
                    problems.append(f"{where}: an anchor into a file that is not Markdown")
                elif anchor not in anchors(resolved):
                    problems.append(f"{where}: no heading in {resolved.name} has the id #{anchor}")
    return problems


def docs_pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def nav_pages(nav) -> list[str]:
    """Every page a mkdocs nav names (nested sections included)."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    return []


def mkdocs_build(config: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config), "--site-dir", str(site)],
        capture_output=True, text=True, cwd=config.parent, env=env, timeout=240,
    )


# --- the checker itself: it must be able to fail --------------------------------------------------------------

def test_the_link_checker_finds_a_missing_file_a_missing_anchor_and_a_link_out_of_docs(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (tmp_path / "outside.txt").write_text("x\n")
    (docs / "b.md").write_text("# B page\n\n## Sharing the channel: `orchestrate serve`\n\n## Sharing the channel: `orchestrate serve`\n")
    (docs / "a.md").write_text(
        "# A\n\n"
        "[fine](b.md#sharing-the-channel-orchestrate-serve) and [second](b.md#sharing-the-channel-orchestrate-serve_1)\n"
        "[own](#a) [gone](c.md) [bad anchor](b.md#sharing) [out](../outside.txt) [web](https://example.org/x)\n"
        "`[in code](nowhere.md)`\n\n```\n[in a fence](nowhere.md)\n```\n"
    )
    problems = broken_links(docs / "a.md", docs)
    assert problems == [
        "a.md:4: c.md: c.md does not exist",
        "a.md:4: b.md#sharing: no heading in b.md has the id #sharing",
        "a.md:4: ../outside.txt: leads out of docs/ (write it as a code span instead)",
    ]


def test_slugs_follow_mkdocs_toc():
    assert slugify("Checking the pins: `orchestrate pins` and the upstream contract tests") == (
        "checking-the-pins-orchestrate-pins-and-the-upstream-contract-tests")
    assert slugify("One channel, many GPUs: `__amdgpu_arch`") == "one-channel-many-gpus-__amdgpu_arch"
    assert slugify("Pinning AMD's artifacts: the lock") == "pinning-amds-artifacts-the-lock"
    assert slugify("Channel names (`source_channels`, `--source-channel`)") == (
        "channel-names-source_channels-source-channel")


# --- README: a front page ----------------------------------------------------------------------------------------

def test_readme_is_a_front_page_that_opens_with_the_two_commands():
    lines = README.read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines: move text into docs/ (at most {README_MAX_LINES})"
    body = [line for line in lines[1:] if line.strip()]
    assert lines[0].startswith("# ") and body[0].startswith("```"), "README opens with its title, then the commands"
    block = re.sub(r"\\\n\s*", "", "\n".join(body[1:body.index("```", 1)])).splitlines()  # continuation lines joined
    commands = [line.split("#")[0].strip() for line in block if line.strip() and not line.startswith("#")]
    assert len(commands) == 2, block
    assert "pip install" in commands[0] and "orchestrate" in commands[0], "the first command sets up and runs the job"
    ci_run = (REPO / ".ci" / "run").read_text().splitlines()
    assert commands[1].startswith("python -m pytest") and commands[1] in ci_run, \
        "the second runs the tests, exactly as .ci/run does"


def test_every_relative_link_and_anchor_in_readme_resolves():
    assert broken_links(README) == []


def test_every_relative_link_and_anchor_in_the_docs_resolves():
    problems = [problem for page in docs_pages() for problem in broken_links(page, DOCS)]
    assert problems == []


# --- the site ---------------------------------------------------------------------------------------------------

def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists():
    config = yaml.safe_load(MKDOCS_YML.read_text())
    assert config["docs_dir"] == "docs" and config["theme"]["name"] == "material"
    listed = nav_pages(config["nav"])
    pages = [str(page.relative_to(DOCS)) for page in docs_pages()]
    assert sorted(set(listed)) == sorted(listed), "a page is listed twice in the nav"
    assert sorted(pages) == sorted(listed), "docs/ and mkdocs.yml's nav must list the same pages"


def test_the_benchmark_plot_in_the_docs_is_the_recorded_one():
    recorded = REPO / "tests" / "benchmarks" / "results" / "h200-sdpa.png"
    assert (DOCS / "images" / "h200-sdpa.png").read_bytes() == recorded.read_bytes(), (
        "copy tests/benchmarks/results/h200-sdpa.png to docs/images/ after a new reference run")


@NEEDS_MKDOCS
def test_the_site_builds_with_strict(tmp_path):
    done = mkdocs_build(MKDOCS_YML, tmp_path / "site")
    assert done.returncode == 0, done.stderr[-3000:]
    for page in docs_pages():
        built = tmp_path / "site" / ("index.html" if page.stem == "index" else f"{page.stem}/index.html")
        html_ids = set(re.findall(r'\bid="([^"]+)"', built.read_text()))
        assert anchors(page) <= html_ids, f"{page.name}: the checker's slugs differ from MkDocs' ids"
        # GitHub renders a list that follows a paragraph line directly; Python-Markdown needs a blank line first
        glued = [p[:80] for p in re.findall(r"<p>(.*?)</p>", built.read_text(), re.S) if re.search(r"\n(- |\d+\. )", p)]
        assert glued == [], f"{page.name}: put a blank line before these lists: {glued}"
    assert (tmp_path / "site" / "images" / "h200-sdpa.png").exists()


@NEEDS_MKDOCS
def test_strict_fails_on_a_broken_anchor(tmp_path):
    """The strict build is a real check: mkdocs.yml's validation settings turn a bad anchor into a failure."""
    shutil.copytree(DOCS, tmp_path / "docs")
    shutil.copy(MKDOCS_YML, tmp_path / "mkdocs.yml")
    page = tmp_path / "docs" / "reference.md"
    page.write_text(page.read_text() + "\n[broken](sharing.md#no-such-heading)\n")
    done = mkdocs_build(tmp_path / "mkdocs.yml", tmp_path / "site")
    assert done.returncode != 0 and "no-such-heading" in done.stderr, done.stderr[-3000:]
