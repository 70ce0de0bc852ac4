"""The bump's report (orchestrate.bump.report): the pull request body a maintainer reviews, and the dated
"Checked against upstream" list in docs/versions.md, rewritten in place and only when something changed."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrate.bump.prove import Proof
from orchestrate.bump.report import (DOCS_FILE, END, START, checked_against_upstream, markdown,
                                     write_checked_against_upstream, write_report)
from orchestrate.cli import main
from orchestrate.errors import UserError

REPO = Path(__file__).resolve().parent.parent

ROWS = [
    {"name": "vllm", "pinned": "0.33.0", "decision": "moves", "to": "0.34.0", "group": "torch",
     "reason": "vllm-0.34.0-cp38-abi3-manylinux_2_31_x86_64.whl METADATA",
     "notes_url": "https://github.com/vllm-project/vllm/releases/tag/v0.34.0", "hold": None,
     "files": ["variants/shared.yaml", "recipes/vllm/recipe.yaml"]},
    {"name": "pytorch", "pinned": "2.14.1", "decision": "moves", "to": "2.15.0", "group": "torch",
     "reason": "torch-2.15.0 wheel METADATA | PyPI", "notes_url": "https://github.com/pytorch/pytorch/releases/tag/v2.15.0",
     "hold": None, "files": ["variants/shared.yaml"]},
    {"name": "flash-attn", "pinned": "2.8.4", "decision": "held", "to": None, "group": "flash-attn",
     "reason": "patch 0001-ck-rdna.patch no longer applies to flash-attn 2.8.5", "notes_url": None, "hold": None,
     "files": []},
    {"name": "aiter", "pinned": "0.1.20.post1", "decision": "held", "to": None, "group": "aiter", "reason": "",
     "notes_url": None, "hold": "v0.1.26's CK submodule breaks gfx1151 (issue 31)", "files": []},
    {"name": "rocm-sdk", "pinned": "10.1.0", "decision": "unknown", "to": None, "group": "torch",
     "reason": "https://stable.repo.amd.com/rocm/whl-next/rocm/ cannot be reached", "notes_url": None, "hold": None,
     "files": []},
    {"name": "torchaudio", "pinned": "2.11.0", "decision": "current", "to": None, "group": "torch",
     "reason": "PyPI torchaudio 2.11.0", "notes_url": "https://pypi.org/project/torchaudio/2.11.0/", "hold": None,
     "files": []},
]
PROOFS = [Proof("fetch", "passed", "14 source(s) (14 fetched): every checksum and commit matched, every patch applied"),
          Proof("plan", "passed", "20 plan(s): 10 architecture(s) on prebuilt and source"),
          Proof("solve", "skipped", "conda-forge cannot be reached: check the network"),
          Proof("contract tests", "failed", "1 failed, 52 passed: test_pin_is_the_head: aiter is at 0123abcd")]


@pytest.fixture(scope="module")
def body() -> str:
    return markdown(ROWS, PROOFS, generated="2026-11-30", written=True)


def test_the_pull_request_body_has_old_to_new_with_each_releases_notes(body):
    table = [line for line in body.splitlines() if line.startswith("| ")]
    assert table[0].startswith("| component | from | to | release notes |")
    assert table[1] == ("| vllm | 0.33.0 | 0.34.0 | [release notes](https://github.com/vllm-project/vllm/releases/tag/v0.34.0)"
                        " | torch | vllm-0.34.0-cp38-abi3-manylinux_2_31_x86_64.whl METADATA |"
                        " `variants/shared.yaml`, `recipes/vllm/recipe.yaml` |")
    assert table[2].count(" | ") == 6  # a pipe inside a reason stays inside its cell
    assert "torch-2.15.0 wheel METADATA \\| PyPI" in table[2]
    assert body.startswith("# Pins: 2 moving, 2 held, 1 unknown, 1 current")
    assert "2026-11-30" in body and "written to the files named in the table" in body


def test_held_unknown_and_current_rows_say_why(body):
    assert "- **flash-attn** stays at 2.8.4 (group flash-attn): patch 0001-ck-rdna.patch no longer applies" in body
    assert ("- **aiter** stays at 0.1.20.post1 (group aiter): held on purpose (`hold: v0.1.26's CK submodule breaks "
            "gfx1151 (issue 31)`)") in body
    assert "- **rocm-sdk** (10.1.0): https://stable.repo.amd.com/rocm/whl-next/rocm/ cannot be reached" in body
    assert "**Partial result:** 1 pin could not be decided" in body
    assert "torchaudio 2.11.0." in body
    newer = dict(ROWS[2], notes_url="https://pypi.org/project/flash-attn/2.8.5/")
    assert "no longer applies to flash-attn 2.8.5 ([newer release](https://pypi.org/project/flash-attn/2.8.5/))" in (
        markdown([newer], [], generated="2026-11-30", written=False))


def test_what_was_proven_lists_every_proof_and_a_failure_says_do_not_merge(body):
    proven = body.split("## What was proven", 1)[1].split("##", 1)[0]
    assert [line for line in proven.splitlines() if line.startswith("- ")] == [
        f"- **{p.status}** {p.name}: {p.detail}" for p in PROOFS]
    assert "**Do not merge:** 1 proof failed" in body
    assert "## How to review" in body and "# hold: <reason>" in body


def test_nothing_written_and_nothing_moving_says_so():
    body = markdown([r for r in ROWS if r["decision"] == "current"], [], generated="2026-11-30", written=False)
    assert "Nothing was written" in body and "Nothing moves." in body and "Do not merge" not in body
    assert "Partial result" not in body and "without `--prove`" in body


def test_the_checked_against_upstream_list_is_dated_and_ordered_by_decision():
    text = checked_against_upstream(ROWS, "2026-11-30")
    assert text.startswith("**Checked against upstream on 2026-11-30**")
    items = [line for line in text.splitlines() if line.startswith("- ")]
    assert items[0] == ("- vllm: 0.33.0 → [0.34.0](https://github.com/vllm-project/vllm/releases/tag/v0.34.0) "
                        "(vllm-0.34.0-cp38-abi3-manylinux_2_31_x86_64.whl METADATA)")
    assert [i.split(":")[0].split(" ")[1] for i in items] == ["vllm", "pytorch", "flash-attn", "aiter", "rocm-sdk",
                                                             "torchaudio"]
    assert items[-1] == ("- torchaudio: [2.11.0](https://pypi.org/project/torchaudio/2.11.0/) was current on "
                         "2026-11-30 (PyPI torchaudio 2.11.0)")  # dated: the line may be quoted alone
    assert "2 moving, 2 held, 1 unknown, 1 current" in text


def test_rewriting_the_docs_block_is_idempotent_and_keeps_the_rest(tmp_path):
    page = tmp_path / "versions.md"
    page.write_text(f"# Versions\n\nprose before\n\n{START}\nhand-written list\n{END}\n\nprose after\n")
    assert write_checked_against_upstream(page, ROWS, "2026-11-30") is True
    first = page.read_text()
    assert first.startswith("# Versions\n\nprose before\n\n" + START + "\n**Checked against upstream on 2026-11-30**")
    assert first.endswith(f"\n{END}\n\nprose after\n") and "hand-written list" not in first
    assert write_checked_against_upstream(page, ROWS, "2026-11-30") is False
    assert write_checked_against_upstream(page, ROWS, "2026-12-07") is False  # only the date differs: no change
    assert page.read_text() == first
    moved = [dict(r, pinned="0.34.0", decision="current", to=None) if r["name"] == "vllm" else r for r in ROWS]
    assert write_checked_against_upstream(page, moved, "2026-12-07") is True
    assert "on 2026-12-07" in page.read_text() and page.read_text().count(START) == 1


def test_a_page_without_the_markers_is_one_line_naming_them(tmp_path):
    page = tmp_path / "versions.md"
    page.write_text("# Versions\n")
    with pytest.raises(UserError, match="has no <!-- checked-against-upstream:start --> .* block: add the two markers"):
        write_checked_against_upstream(page, ROWS, "2026-11-30")
    assert page.read_text() == "# Versions\n"


def test_docs_versions_md_has_the_one_block_the_bump_rewrites(tmp_path):
    """`pins --bump --docs` rewrites docs/versions.md in place: its markers are there once, and a rewrite
    changes the block and nothing around it."""
    real = (REPO / DOCS_FILE).read_text()
    assert real.count(START) == 1 and real.count(END) == 1 and real.index(START) < real.index(END)
    before, block = real.split(START)[0], real.split(START)[1].split(END)[0]
    assert re.match(r"\n\*\*Checked against upstream on \d{4}-\d{2}-\d{2}\*\*", block)
    page = tmp_path / "versions.md"
    page.write_text(real)
    assert write_checked_against_upstream(page, ROWS, "2026-11-30") is True
    assert page.read_text().split(START)[0] == before and page.read_text().split(END)[1] == real.split(END)[1]


@pytest.mark.parametrize("flags, named", [
    (["--report", "{tmp}/missing/report.md"], "--report {tmp}/missing/report.md: the folder {tmp}/missing does not "
                                              "exist: create it (mkdir -p {tmp}/missing)"),
    (["--report", "{tmp}"], "--report {tmp} is a folder: name a file in it"),
    (["--docs"], f"--docs: {{tmp}}/{DOCS_FILE} does not exist: run from the workspace, or pass --workspace"),
])
def test_a_report_or_docs_that_cannot_be_written_stops_before_anything_is_read_or_written(tmp_path, capsys, flags, named):
    """Checked first: a --write must not have moved the pins when the report then cannot be written."""
    (tmp_path / "variants").mkdir()
    code = main(["pins", "--bump", "--write", "--workspace", str(tmp_path), "--pypi-url", "http://127.0.0.1:9",
                 *[f.format(tmp=tmp_path) for f in flags]])
    out, err = capsys.readouterr()
    assert code != 0 and "Traceback" not in out + err
    assert len(err.splitlines()) == 1 and err.startswith(f"error: {named.format(tmp=tmp_path)}"), err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["variants"]


def test_a_report_that_fails_to_write_is_one_line_naming_it(tmp_path):
    with pytest.raises(UserError, match=r"--report: cannot write .*report.md \(.*\): fix the path"):
        write_report(tmp_path / "report.md" / "report.md", "# report\n")  # a file where a folder must be
