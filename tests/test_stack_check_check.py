"""`check` without a GPU, its exit codes, its accuracy test, and the architecture table it reads."""
import json

import pytest

from rocm_stack_check import architecture_facts, check, exit_codes
from rocm_stack_check.architecture_facts import ArchitectureTable, expectations_for, find_aotriton_files
from rocm_stack_check.cli import main

torch = pytest.importorskip("torch")
no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")


@no_gpu
def test_check_without_a_gpu_fails_unless_a_recipe_test_allows_it(capsys):
    assert main(["check", "--json", "--allow-no-gpu"]) == exit_codes.OK
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert report["status"] == "no-gpu" and report["platform"]["torch_version"] == torch.__version__
    assert "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL" in report["environment"]
    assert "allowed by --allow-no-gpu (a recipe test on a build machine)" in captured.err
    for flags in ([], ["--require-gpu"]):  # the default, and the old flag that asked for it
        assert main(["check", *flags]) == exit_codes.NO_GPU
        assert capsys.readouterr().out.startswith("rocm-stack-check check: no-gpu: PyTorch ")


def test_check_without_pytorch_is_a_missing_gpu(monkeypatch, capsys):
    monkeypatch.setattr(check, "import_torch", lambda: (None, "ModuleNotFoundError: No module named 'torch'"))
    assert main(["check", "--allow-no-gpu"]) == exit_codes.OK
    assert "PyTorch not importable" in capsys.readouterr().out
    assert main(["check", "--json"]) == exit_codes.NO_GPU
    assert "PyTorch does not import (ModuleNotFoundError: No module named 'torch')" in capsys.readouterr().err


def _report(flash_passed=True, flash_expected=True, flash_attn=None):
    run = {"backend": "flash", "dtype": "fp16", "passed": flash_passed, "forward_ok": True, "backward_ok": True,
           "errors": {"out": 1e-4}, "tolerance": 5e-3, "error": ""}
    return {"sdpa": {}, "flash_runs": [run, dict(run, dtype="bf16")],
            "expectations": {"flash_expected": flash_expected},
            "flash_attn": flash_attn or {"installed": False, "error": "", "runs": []}}


@pytest.mark.parametrize("report, flags, expected", [
    (_report(), {}, ("ok", exit_codes.OK)),
    (_report(flash_passed=False), {}, ("flash-unusable", exit_codes.FAILED)),
    (_report(flash_passed=False, flash_expected=False), {}, ("flash-not-expected", exit_codes.OK)),
    (_report(), {"require_flash_attn": True}, ("flash-unusable", exit_codes.FAILED)),
    (_report(flash_attn={"installed": True, "error": "", "runs": [{"passed": False}]}), {},
     ("flash-unusable", exit_codes.FAILED)),
    (_report(flash_attn={"installed": True, "error": "", "runs": [{"passed": True}]}), {"require_flash_attn": True},
     ("ok", exit_codes.OK)),
    ({"sdpa": None}, {}, ("no-gpu", exit_codes.OK)),
    ({"sdpa": None}, {"require_gpu": True}, ("no-gpu", exit_codes.NO_GPU)),
])
def test_exit_codes(report, flags, expected):
    assert check.decide_status(report, **flags) == expected


def test_accuracy_check_passes_a_right_backend_and_fails_a_wrong_one():
    from rocm_stack_check.attention import Backend, SdpaBackend, Shape, check_against_math

    class Wrong(Backend):
        name = "wrong"

        def attention(self, q, k, v, causal):
            return q + k + v  # not attention at all, but differentiable in every input

    shape = Shape(1, 2, 64, 16)
    flash_on_cpu = SdpaBackend(torch, "flash", "FLASH_ATTENTION", "")
    for dtype in ("fp16", "bf16"):
        assert check_against_math(torch, flash_on_cpu, shape, dtype, True, "cpu")["passed"]
        wrong = check_against_math(torch, Wrong(torch), shape, dtype, True, "cpu")
        assert wrong["backward_ok"] and not wrong["passed"]
    unsupported = check_against_math(torch, SdpaBackend(torch, "x", "EFFICIENT_ATTENTION", ""), shape, "bf16", True, "cpu")
    assert not unsupported["forward_ok"] and unsupported["error"]


def test_summary_of_a_rocm_report_names_what_users_look_for():
    report = _report()
    report.update(
        status="ok", notes=[], problems=["set TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL=1"],
        platform={"python": "3.12", "system": "Linux", "torch_version": "2.13.0", "torch_error": "",
                  "hip_version": "7.2", "cuda_version": None, "device_present": True, "device_count": 1,
                  "device_name": "Radeon 8060S", "arch_full": "gfx1151", "total_memory_mib": 65536},
        architecture_table={"source": "package"},
        expectations={"known": True, "arch": "gfx1151", "product": "Strix Halo", "aotriton": "yes",
                      "ck_sdpa": "no", "flash_attn_backends": ["ck"], "flash_expected": True},
        aotriton={"library": "/p/lib/libaotriton_v2.so", "images_dir": "/p/lib/aotriton.images/amd-gfx115x",
                  "image_count": 12},
        sdpa={"preferred_rocm_fa_library": "_ROCmFABackend.AOTriton", "ck_sdpa_available": False,
              "flash_available": True, "flash_enabled": True, "mem_efficient_enabled": True,
              "representative_input": {"shape": "2,8,1024,64"}, "can_use_flash_attention": True,
              "can_use_flash_attention_reasons": [], "can_use_efficient_attention": False,
              "can_use_efficient_attention_reasons": ["head dim too large"]},
        environment={"TORCH_ROCM_FA_PREFER_CK": "1"},
    )
    summary = check.format_summary(report)
    for expected in ("HIP 7.2", "gfx1151", "AOTriton", "amd-gfx115x", "can_use_flash_attention", "head dim too large",
                     "TORCH_ROCM_FA_PREFER_CK=1", "problem: set TORCH_ROCM_AOTRITON"):
        assert expected in summary


TABLE = ArchitectureTable(architectures={
    "gfx1151": {"product": "Strix Halo", "aotriton_image_family": "gfx115x",
                "capabilities": {"aotriton": {"value": "yes"}, "ck_sdpa": {"value": "no", "why": "x"},
                                 "flash_attn_ck": {"value": "yes"}, "flash_attn_triton": {"value": "yes"}}},
    "gfx1101": {"product": "RX 7800", "aotriton_image_family": "gfx110x",
                "capabilities": {"aotriton": {"value": "experimental", "why": "flagged"}}},
    "gfx908": {"product": "MI100", "aotriton_image_family": "",
               "capabilities": {"aotriton": {"value": "no", "why": "no target"}}},
}, source="test")


def test_expectations_follow_the_table():
    strix_halo = expectations_for("gfx1151", TABLE)
    assert strix_halo.flash_expected and strix_halo.required_environment == {}
    assert strix_halo.aotriton_image_family == "gfx115x" and strix_halo.flash_attn_backends == ["ck", "triton"]
    assert expectations_for("gfx1101", TABLE).required_environment == {"TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL": "1"}
    assert not expectations_for("gfx908", TABLE).flash_expected
    assert not expectations_for("sm_90", TABLE).known


def test_packaged_table_is_preferred_and_the_checkout_is_the_fallback(tmp_path, monkeypatch):
    packaged = tmp_path / "architectures.json"
    monkeypatch.setattr(architecture_facts, "PACKAGED_TABLE", packaged)
    table, problem = architecture_facts.load_architecture_table()
    if table is not None:  # a checkout: the repository's YAML (needs PyYAML, as the project env has)
        assert table.source.endswith("architectures.yaml") and "gfx1151" in table.architectures
    packaged.write_text(json.dumps({"architectures": TABLE.architectures}))
    table, problem = architecture_facts.load_architecture_table()
    assert table.source == "package" and set(table.architectures) == set(TABLE.architectures) and problem == ""


def test_aotriton_files_are_found_in_torch_lib_dir(tmp_path):
    images = tmp_path / "aotriton.images" / "amd-gfx115x" / "flash"
    images.mkdir(parents=True)
    (images / "attn_fwd.aks2").write_bytes(b"x")
    (tmp_path / "libaotriton_v2.so.0.11.0").write_bytes(b"x")
    found = find_aotriton_files(tmp_path, "gfx115x")
    assert found.complete and found.image_count == 1 and found.library.endswith("libaotriton_v2.so.0.11.0")
    assert not find_aotriton_files(tmp_path, "gfx120x").complete


def test_recipe_version_matches_the_package():
    yaml = pytest.importorskip("yaml")
    from pathlib import Path

    import rocm_stack_check

    recipe = Path(__file__).parents[1] / "recipes" / "rocm-stack-check" / "recipe.yaml"
    assert yaml.safe_load(recipe.read_text())["context"]["version"] == rocm_stack_check.__version__
