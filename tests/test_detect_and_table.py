"""Architecture choice (flag, environment, hardware) and the one architecture table."""
from __future__ import annotations

from pathlib import Path

import pytest

from orchestrate import detect
from orchestrate.architectures import ArchitectureTable, choose_arch, stale_variant_files
from orchestrate.errors import UserError

REPO = Path(__file__).resolve().parent.parent
TABLE = ArchitectureTable.load(REPO / "variants")
# The 26 targets AMD ships PyTorch device wheels for: TheRock RELEASES.md @89553ce3 (2026-08-22), its
# "Supported Python [device-*] install extras" table (issue 35)
THEROCK_DEVICE_EXTRAS = {"gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx950", "gfx1010", "gfx1011", "gfx1012",
                         *(f"gfx103{i}" for i in range(7)), *(f"gfx110{i}" for i in range(4)),
                         *(f"gfx115{i}" for i in range(4)), "gfx1200", "gfx1201"}


def fake_kfd(tmp_path: Path, versions: list[int]) -> Path:
    nodes = tmp_path / "nodes"
    for i, version in enumerate(versions):
        (nodes / str(i)).mkdir(parents=True)
        (nodes / str(i) / "properties").write_text(f"cpu_cores_count 16\ngfx_target_version {version}\nsimd_count 0\n")
    return nodes


@pytest.mark.parametrize("version,name", [(110501, "gfx1151"), (90010, "gfx90a"), (90402, "gfx942"),
                                          (120001, "gfx1201"), (90008, "gfx908")])
def test_kfd_target_version_decodes_to_gfx_name(version, name):
    assert detect.gfx_name_from_target_version(version) == name


def test_kfd_topology_skips_cpu_nodes(tmp_path):
    assert detect._from_kfd_topology(fake_kfd(tmp_path, [0, 110501])) == ["gfx1151"]


def test_choice_order_flag_then_environment_then_hardware(monkeypatch):
    monkeypatch.setattr(detect, "detect_gpu_arch", lambda: "gfx1100")
    monkeypatch.setenv("ORCHESTRATE_ARCH", "gfx942")
    assert choose_arch("gfx1151", TABLE) == "gfx1151"
    assert choose_arch(None, TABLE) == "gfx942"
    monkeypatch.delenv("ORCHESTRATE_ARCH")
    assert choose_arch(None, TABLE) == "gfx1100"


def test_detected_but_unknown_architecture_is_an_error(monkeypatch):
    monkeypatch.setattr(detect, "detect_gpu_arch", lambda: "gfx1250")
    monkeypatch.delenv("ORCHESTRATE_ARCH", raising=False)
    with pytest.raises(UserError, match="unknown architecture 'gfx1250'"):
        choose_arch(None, TABLE)


def test_rocminfo_output_is_parsed(monkeypatch):
    monkeypatch.setattr(detect, "_run", lambda cmd: "  Name:  gfx000\n  Name:                    gfx1151\n" if cmd[0] == "rocminfo" else "")
    monkeypatch.setattr(detect, "_from_kfd_topology", lambda nodes: [])
    assert detect.detect_gpu_arch() == "gfx1151"


def test_table_covers_every_architecture_the_product_promises():
    assert set(TABLE.names()) == THEROCK_DEVICE_EXTRAS and len(THEROCK_DEVICE_EXTRAS) == 26


def test_every_row_cites_its_evidence_and_says_where_amd_ships_no_pytorch():
    for arch in TABLE.architectures.values():
        assert "RELEASES.md @89553ce3 (2026-08-22)" in arch.prebuilt_torch.why, arch.name
    no_wheels = {a.name for a in TABLE.architectures.values() if a.prebuilt_torch.value == "no"}
    # rocm_whl_next_ownership.yaml @89553ce3: their torch and SDK device wheels are on dev and nightly only
    assert no_wheels == {"gfx900", "gfx906"}
    assert all("dev and nightly streams only" in TABLE.get(a).prebuilt_torch.why for a in no_wheels)


def test_family_device_packages_are_the_ones_amd_publishes():
    """amd-torch-device-<family> for the families whose aotriton images are shared (rocm_whl_next_ownership.yaml)."""
    families = {}
    for arch in TABLE.architectures.values():
        families.setdefault(arch.torch_device_family, set()).add(arch.name)
    assert families.pop("") == {"gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx950", "gfx1010", "gfx1011",
                                "gfx1012", *(f"gfx103{i}" for i in range(7))}
    assert families == {"gfx110x": {f"gfx110{i}" for i in range(4)}, "gfx115x": {f"gfx115{i}" for i in range(4)},
                        "gfx12-0": {"gfx1200", "gfx1201"}}


@pytest.mark.parametrize("arch,sdpa", [("gfx1102", "experimental"), ("gfx1103", "experimental"),
                                       ("gfx1152", "experimental"), ("gfx1153", "experimental"), ("gfx1100", "yes"),
                                       ("gfx1030", "no"), ("gfx906", "no")])
def test_aotriton_flash_follows_aotriton_013b(arch, sdpa):
    """AOTRITON_SUPPORTED_GPUS and isArchExperimentallySupported at aotriton 0.13b (6e00ef3e), PyTorch 2.14's pin."""
    assert TABLE.get(arch).capabilities["aotriton"].value == sdpa


def test_isa_versions_match_gfx_names():
    for arch in TABLE.architectures.values():
        major, minor, step = (int(x) for x in arch.isa.split("."))
        assert detect.gfx_name_from_target_version(major * 10000 + minor * 100 + step) == arch.name


def test_every_unsupported_capability_says_why():
    for arch in TABLE.architectures.values():
        for cap in arch.capabilities.values():
            assert cap.value in ("yes", "experimental", "no")
            assert cap.value == "yes" or cap.why, f"{arch.name} {cap.name}"


def test_committed_variant_files_match_the_table():
    assert stale_variant_files(TABLE, REPO / "variants") == []


def test_variants_regenerates_the_support_tables_of_readme_and_the_manual(tmp_path):
    """`orchestrate variants` finds a stale copy of the table in README or the manual, and --write restores it."""
    import shutil
    from orchestrate.architectures import support_pages

    (tmp_path / "docs").mkdir()
    for page in ("README.md", "docs/index.md"):
        shutil.copy(REPO / page, tmp_path / page)
    assert support_pages(TABLE, tmp_path) == []
    readme = tmp_path / "README.md"
    readme.write_text(readme.read_text().replace("| gfx1100, gfx1101, gfx1102, gfx1103 |", "| gfx1100 |"))
    assert support_pages(TABLE, tmp_path) == [readme]
    assert support_pages(TABLE, tmp_path, write=True) == [readme]
    assert readme.read_text() == (REPO / "README.md").read_text()


def test_the_check_tool_reads_the_table_where_a_capability_is_absent():
    """rocm-stack-check on a GPU of the table without aotriton (gfx1030, gfx906, ...): Flash SDPA is not expected,
    a run without it passes on correctness, and the report carries the table's reason; experimental rows ask for
    the variable PyTorch needs. Read from the repository's table, as the packaged check reads its copy."""
    from rocm_stack_check import check, exit_codes
    from rocm_stack_check.architecture_facts import load_architecture_table, expectations_for

    table, problem = load_architecture_table()
    assert table is not None and set(table.architectures) == set(TABLE.names()), problem
    run = {"backend": "flash", "dtype": "fp16", "passed": False, "forward_ok": False, "backward_ok": False,
           "errors": {}, "tolerance": 5e-3, "error": "no kernel"}
    for arch in TABLE.architectures.values():
        expected = expectations_for(arch.name, table)
        aotriton = arch.capabilities["aotriton"]
        assert (expected.aotriton, expected.aotriton_why) == (aotriton.value, aotriton.why)
        report = {"sdpa": {}, "flash_runs": [run], "expectations": expected.to_dict(),
                  "flash_attn": {"installed": False, "error": "", "runs": []}}
        if aotriton.value == "no" and arch.capabilities["ck_sdpa"].value == "no":
            assert check.decide_status(report) == ("flash-not-expected", exit_codes.OK), arch.name
            assert report["expectations"]["aotriton_why"].startswith("aotriton 0.13b"), arch.name
        if aotriton.value == "experimental":
            assert expected.required_environment == {"TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL": "1"}


@pytest.mark.parametrize("arch, says", [
    ("gfx1103", "aotriton Flash, experimental (the environment sets TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL=1)"),
    ("gfx1152", "aotriton Flash, experimental"), ("gfx1100", "aotriton Flash and memory-efficient attention"),
    ("gfx1030", "none, PyTorch runs its math attention (correct, slower): aotriton 0.13b (6e00ef3e) has no gfx1030")])
def test_plan_for_a_new_target_says_what_flash_attention_it_gets(arch, says, capsys, monkeypatch):
    from orchestrate.cli import main

    monkeypatch.setenv("COLUMNS", "1000")
    assert main(["plan", "--arch", arch, "--workspace", str(REPO), "--channel", "/nonexistent/a-table-channel"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"Plan for {arch} ({TABLE.get(arch).product})" in out and f"Flash attention (SDPA) on {arch}: {says}" in out
