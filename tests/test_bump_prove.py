"""Proving a set of pins (orchestrate.bump.prove): on the real recipes, every architecture plans on both
PyTorch paths and the solve is skipped, saying why, where no channel answers; on the test graph, fetch
passes and a wrong checksum or a stale patch fails it with the cause; the contract tests run in a pytest
subprocess against the given checkouts, and are skipped, saying why, without them. No network: sources
on 127.0.0.1, channels at a closed loopback port."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from orchestrate.architectures import ArchitectureTable
from orchestrate.bump import prove
from orchestrate.bump.prove import CONTRACT, FAILED, FETCH, PASSED, PLAN, SKIPPED, SOLVE, Proof
from orchestrate.ui import Reporter
from source_helpers import sourced_recipe

REPO = Path(__file__).resolve().parent.parent
CLOSED = "http://127.0.0.1:9/nothing-listens-here"
QUIET = Reporter(quiet=True)


def by_name(proofs: list[Proof]) -> dict[str, Proof]:
    return {p.name: p for p in proofs}


@pytest.fixture(scope="module")
def real_plans():
    """The real recipes planned for every architecture, as prove() plans them (no fetch: that downloads)."""
    with tempfile.TemporaryDirectory() as scratch:
        options = prove.prove_options(REPO, Path(scratch) / "channel", [CLOSED])
        plans, proof = prove.prove_plans(options, None, QUIET)
        yield options, plans, proof


def test_every_architecture_plans_on_both_pytorch_paths_offline(real_plans):
    _, plans, proof = real_plans
    arches = ArchitectureTable.load(REPO / "variants").names()
    assert proof.status == PASSED, proof.detail
    assert f"{len(arches)} architecture(s) on prebuilt and source" in proof.detail
    paths = {(p.arch.name, p.choice.pytorch.value) for p in plans}
    source_only = {a for a in arches if (a, "prebuilt") not in paths}
    assert {a for a, _ in paths} == set(arches) and {v for _, v in paths} == {"prebuilt", "source"}
    assert all((a, "source") in paths for a in arches)
    assert all(a in proof.detail for a in source_only)  # an architecture without AMD's PyTorch says why


def test_the_solve_is_skipped_saying_why_when_no_channel_answers(real_plans):
    options, plans, _ = real_plans
    proof = prove.prove_solve(plans, options, QUIET)
    assert proof.status == SKIPPED
    assert CLOSED in proof.detail and "cannot be reached" in proof.detail


def test_a_plan_that_cannot_be_made_fails_the_plan_proof_naming_it(tmp_path):
    proofs = by_name(prove.prove(REPO, QUIET, archs=["gfx9999"], channels=[CLOSED], sources_dir=None))
    assert proofs[PLAN].status == FAILED and proofs[PLAN].detail.startswith("1 plan(s) failed: gfx9999: ")
    assert proofs[FETCH].status == SKIPPED and proofs[SOLVE].status == SKIPPED  # nothing to fetch or solve


def test_fetch_plan_and_solve_pass_on_good_sources_in_order(workspace, tmp_path):
    with sourced_recipe(workspace, tmp_path):
        proofs = prove.prove(workspace, QUIET, archs=["gfx1151"], channels=[])
    assert [p.name for p in proofs] == [FETCH, PLAN, SOLVE, CONTRACT]
    assert [p.status for p in proofs] == [PASSED, PASSED, PASSED, SKIPPED], proofs
    assert "every checksum and commit matched, every patch applied" in proofs[0].detail
    assert "2 fetched" in proofs[0].detail  # the tarball and the git checkout
    assert "tests/test_upstream_contract.py is not in" in proofs[3].detail


def test_a_wrong_checksum_fails_fetch_with_expected_and_actual(workspace, tmp_path):
    with sourced_recipe(workspace, tmp_path) as upstream:
        recipe = workspace / "recipes/sourced/recipe.yaml"
        recipe.write_text(recipe.read_text().replace(upstream.sha256, "0" * 64))
        proof = by_name(prove.prove(workspace, QUIET, archs=["gfx1151"], channels=[]))[FETCH]
    assert proof.status == FAILED
    assert "\n" not in proof.detail
    assert f"sourced: {upstream.url}/upstream-1.0.tar.gz: " in proof.detail
    assert "expected " + "0" * 64 in proof.detail and f"actual {upstream.sha256}" in proof.detail


def test_a_patch_that_no_longer_applies_fails_fetch_naming_it(workspace, tmp_path):
    with sourced_recipe(workspace, tmp_path):
        patch = workspace / "patches/sourced/0001-patch-kernels.patch"
        patch.write_text(patch.read_text().replace("-upstream kernels", "-kernels of another release"))
        proof = by_name(prove.prove(workspace, QUIET, archs=["gfx1151"], channels=[]))[FETCH]
    assert proof.status == FAILED
    assert "patch 0001-patch-kernels.patch does not apply" in proof.detail and "\n" not in proof.detail


CONTRACT_TESTS = '''
import os
from pathlib import Path

def test_checkout_is_there():
    assert (Path(os.environ["ROCM_STACK_SOURCES"]) / "aiter").is_dir(), "no checkout of aiter"

def test_pin_is_the_head():
    head = (Path(os.environ["ROCM_STACK_SOURCES"]) / "aiter" / "HEAD").read_text().strip()
    assert head == "de07f388", f"aiter is at {head}, the recipe pins de07f388: move the pins together"
'''


@pytest.fixture(scope="module")
def contract_workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("contract")
    (root / "tests").mkdir()
    (root / "tests/test_upstream_contract.py").write_text(CONTRACT_TESTS)
    return root


def test_contract_tests_run_against_the_given_checkouts(contract_workspace, tmp_path):
    (tmp_path / "aiter").mkdir()
    (tmp_path / "aiter/HEAD").write_text("de07f388\n")
    proof = prove.prove_contract(contract_workspace, tmp_path, QUIET)
    assert proof == Proof(CONTRACT, PASSED, proof.detail) and proof.detail.startswith("2 passed")


def test_a_failing_contract_test_fails_the_proof_with_its_message(contract_workspace, tmp_path):
    (tmp_path / "aiter").mkdir()
    (tmp_path / "aiter/HEAD").write_text("0123abcd\n")
    proof = prove.prove_contract(contract_workspace, tmp_path, QUIET)
    assert proof.status == FAILED
    assert proof.detail.startswith("1 failed, 1 passed")
    assert "test_pin_is_the_head: AssertionError: aiter is at 0123abcd, the recipe pins de07f388" in proof.detail


def test_contract_tests_are_skipped_saying_why_without_checkouts(contract_workspace, tmp_path, monkeypatch):
    monkeypatch.delenv(prove.SOURCES_ENV, raising=False)
    skipped = prove.prove_contract(contract_workspace, None, QUIET)
    assert skipped.status == SKIPPED and "ROCM_STACK_SOURCES=DIR" in skipped.detail
    missing = prove.prove_contract(contract_workspace, tmp_path / "nowhere", QUIET)
    assert missing.status == FAILED and "nowhere is not a folder" in missing.detail
