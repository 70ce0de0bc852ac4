"""`rocm-stack-check bench --quick`: no GPU (one line, exit 0), the speed-up verdict from injected timings
(the architecture table decides what must beat math), and the JSON it writes and logs."""
import json

import pytest

pytest.importorskip("torch")

from rocm_stack_check import exit_codes  # noqa: E402
from rocm_stack_check.bench import SCHEMA, validate_document  # noqa: E402
from rocm_stack_check.cli import main  # noqa: E402
from rocm_stack_check.quick import LOG_MARKER, MIN_SPEEDUP_OVER_MATH, QUICK_SHAPES  # noqa: E402


def test_without_a_gpu_it_says_so_in_one_line_and_passes(capsys):
    code = main(["bench", "--quick", "--expect-speedup", "--expect-arch", "gfx1151", "--log-json"])
    out, err = capsys.readouterr()
    assert code == exit_codes.OK
    assert out.strip().count("\n") == 0 and "no GPU" in out and "quick benchmark skipped" in out
    assert err == ""


def test_without_pytorch_it_says_so_in_one_line_and_passes(capsys, monkeypatch):
    # aotriton's and rocm-stack-check's own test environments have no PyTorch
    from rocm_stack_check import environment

    monkeypatch.setattr(environment, "import_torch", lambda: (None, "ModuleNotFoundError: No module named 'torch'"))
    assert main(["bench", "--quick", "--expect-speedup", "--log-json"]) == exit_codes.OK
    out = capsys.readouterr().out
    assert out.strip().count("\n") == 0 and "no GPU: PyTorch not importable" in out


def test_quick_options_without_quick_are_refused_in_one_line(capsys):
    assert main(["bench", "--expect-speedup"]) == exit_codes.USAGE
    assert capsys.readouterr().err.strip() == "rocm-stack-check bench: --expect-speedup goes with --quick: add --quick"


def measurement(ms):
    if isinstance(ms, str):
        return {"status": ms, "ms": None, "tflops": None, "peak_mib": None, "reps": 0, "calls_per_rep": 0,
                "note": f"{ms} here"}
    return {"status": "ok", "ms": ms, "tflops": 1.0, "peak_mib": 10.0, "reps": 3, "calls_per_rep": 1, "note": ""}


def document(arch: str, timings: dict) -> dict:
    """A bench document for `arch` with every quick shape; timings: backend -> (fwd ms, bwd ms) at the largest
    shape (smaller shapes get the same, scaled down)."""
    rows = []
    for shape in QUICK_SHAPES:
        scale = (shape.seq_len / QUICK_SHAPES[-1].seq_len) ** 2
        for dtype in ("fp16", "bf16"):
            for backend, (forward, backward) in timings.items():
                rows.append({"backend": backend, "batch": shape.batch, "heads": shape.heads, "seq_len": shape.seq_len,
                             "head_dim": shape.head_dim, "dtype": dtype, "causal": True,
                             "forward": measurement(forward if isinstance(forward, str) else forward * scale),
                             "backward": measurement(backward if isinstance(backward, str) else backward * scale)})
    return {"schema": SCHEMA, "created": "2026-11-25T12:00:00+00:00",
            "platform": {"arch": arch, "device_name": "test GPU", "torch_version": "2.13.0"},
            "settings": {"mode": "quick"}, "backends": [], "rows": rows}


def judge(tmp_path, capsys, arch, timings, *extra):
    path = tmp_path / "injected.json"
    path.write_text(json.dumps(document(arch, timings)))
    code = main(["bench", "--quick", "--expect-speedup", "--input", str(path), *extra])
    return code, capsys.readouterr().out


def test_flash_not_clearly_faster_than_math_fails_where_the_table_expects_flash(tmp_path, capsys):
    # 1.5x forward, 1.2x backward: the kind of speed-up an unfused fallback gives
    code, out = judge(tmp_path, capsys, "gfx1151", {"math": (10.0, 30.0), "flash": (6.7, 25.0)})
    assert code == exit_codes.FAILED
    assert "flash fp16 forward: 1.5x  TOO SLOW" in out and "flash bf16 backward: 1.2x  TOO SLOW" in out
    assert f"required {MIN_SPEEDUP_OVER_MATH:g}x" in out and "1,16,4096,128" in out
    assert out.rstrip().splitlines()[-1].endswith("FAILED")


def test_flash_well_ahead_of_math_passes(tmp_path, capsys):
    # gfx1151's reference run: 28x forward, 20x backward
    code, out = judge(tmp_path, capsys, "gfx1151", {"math": (28.0, 60.0), "flash": (1.0, 3.0)})
    assert code == exit_codes.OK, out
    assert "flash fp16 forward: 28.0x  ok" in out and "flash bf16 backward: 20.0x  ok" in out
    assert "flash 20.0x over math at 1,16,4096,128" in out and out.rstrip().endswith("passed")


def test_just_under_the_threshold_fails_and_just_over_passes(tmp_path, capsys):
    under = MIN_SPEEDUP_OVER_MATH * 0.95
    over = MIN_SPEEDUP_OVER_MATH * 1.05
    assert judge(tmp_path, capsys, "gfx1151", {"math": (10.0, 10.0), "flash": (10.0 / over, 10.0 / under)})[0] \
        == exit_codes.FAILED
    assert judge(tmp_path, capsys, "gfx1151", {"math": (10.0, 10.0), "flash": (10.0 / over, 10.0 / over)})[0] \
        == exit_codes.OK


def test_a_slow_flash_is_reported_not_failed_where_the_table_expects_none(tmp_path, capsys):
    # gfx908: no aotriton, no CK SDPA, no flash-attn backend
    code, out = judge(tmp_path, capsys, "gfx908", {"math": (10.0, 30.0), "flash": (9.0, 29.0)})
    assert code == exit_codes.OK
    assert "flash fp16 forward: 1.1x" in out and "TOO SLOW" not in out
    assert "no backend (the architecture table expects none here)" in out


def test_an_expected_backend_that_did_not_run_fails(tmp_path, capsys):
    code, out = judge(tmp_path, capsys, "gfx1151", {"math": (10.0, 30.0), "flash": ("unsupported", "unsupported")})
    assert code == exit_codes.FAILED and "flash unsupported" in out and "FAILED" in out


def test_flash_attn_is_judged_where_the_table_lists_a_flash_attn_backend(tmp_path, capsys):
    code, out = judge(tmp_path, capsys, "gfx1151",
                      {"math": (30.0, 60.0), "flash": (1.0, 3.0), "flash_attn": (25.0, 50.0)})
    assert code == exit_codes.FAILED
    assert "flash_attn fp16 forward: 1.2x  TOO SLOW" in out and "flash fp16 forward: 30.0x  ok" in out


def test_math_skipped_for_memory_leaves_nothing_to_judge(tmp_path, capsys):
    code, out = judge(tmp_path, capsys, "gfx1151", {"math": ("skipped", "skipped"), "flash": (1.0, 3.0)})
    assert code == exit_codes.OK and "math skipped: no reference" in out


def test_without_expect_speedup_a_slow_flash_is_shown_but_passes(tmp_path, capsys):
    path = tmp_path / "injected.json"
    path.write_text(json.dumps(document("gfx1151", {"math": (10.0, 30.0), "flash": (9.0, 29.0)})))
    assert main(["bench", "--quick", "--input", str(path)]) == exit_codes.OK
    assert "not enforced" in capsys.readouterr().out


def test_the_json_written_and_logged_is_one_judged_document(tmp_path, capsys):
    path, output = tmp_path / "injected.json", tmp_path / "quick.json"
    path.write_text(json.dumps(document("gfx1151", {"math": (28.0, 60.0), "flash": (1.0, 3.0)})))
    assert main(["bench", "--quick", "--expect-speedup", "--input", str(path), "--output", str(output),
                 "--log-json", "--expect-arch", "gfx1151"]) == exit_codes.OK
    logged = [line for line in capsys.readouterr().out.splitlines() if line.startswith(LOG_MARKER)]
    assert len(logged) == 1
    written = json.loads(output.read_text())
    assert json.loads(logged[0][len(LOG_MARKER):]) == written
    assert validate_document(written) == []
    assert written["expect_arch"] == "gfx1151" and written["expectations"]["arch"] == "gfx1151"
    speedup = written["speedup"]
    assert speedup["passed"] and speedup["threshold"] == MIN_SPEEDUP_OVER_MATH and speedup["shape"] == "1,16,4096,128"
    assert {(r["dtype"], r["pass"], r["speedup"]) for r in speedup["results"]} == {
        ("fp16", "forward", 28.0), ("fp16", "backward", 20.0), ("bf16", "forward", 28.0), ("bf16", "backward", 20.0)}
