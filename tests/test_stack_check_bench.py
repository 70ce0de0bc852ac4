"""The benchmark on the CPU (math backend), its JSON schema and the --compare logic."""
import copy
import json

import pytest

torch = pytest.importorskip("torch")

from rocm_stack_check import exit_codes  # noqa: E402
from rocm_stack_check.bench import (SCHEMA, compare_documents, format_markdown_table, format_table,  # noqa: E402
                                    validate_document)
from rocm_stack_check.cli import main  # noqa: E402

TINY = ["--device", "cpu", "--shape", "1,2,64,16", "--dtype", "bf16", "--warmup", "1", "--min-reps", "2",
        "--max-reps", "3", "--target-ms", "1"]


@pytest.fixture(scope="module")
def tiny_result(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "result.json"
    assert main(["bench", *TINY, "--backend", "math", "--backend", "efficient", "--output", str(path)]) == exit_codes.OK
    return path, json.loads(path.read_text())


def test_tiny_math_run_writes_a_valid_document(tiny_result):
    _, document = tiny_result
    assert document["schema"] == SCHEMA
    assert validate_document(document) == []
    math_rows = [row for row in document["rows"] if row["backend"] == "math"]
    assert {row["causal"] for row in math_rows} == {True, False}
    for row in math_rows:
        for pass_name in ("forward", "backward"):
            assert row[pass_name]["status"] == "ok"
            assert row[pass_name]["ms"] > 0 and row[pass_name]["tflops"] > 0


def test_a_backend_that_cannot_run_is_marked_and_the_run_goes_on(tiny_result):
    _, document = tiny_result
    efficient = [row for row in document["rows"] if row["backend"] == "efficient"]
    assert efficient and all(row["forward"]["status"] == "unsupported" for row in efficient)
    assert "unsupported" in format_table(document)
    assert format_markdown_table(document).count("\n") == len(document["rows"]) + 1


def test_validation_finds_broken_documents(tiny_result):
    _, document = tiny_result
    assert validate_document({"schema": "other"})
    broken = copy.deepcopy(document)
    ok_rows = [row for row in broken["rows"] if row["forward"]["status"] == "ok"]
    del ok_rows[0]["dtype"]
    ok_rows[1]["forward"]["ms"] = None
    problems = validate_document(broken)
    assert any("missing dtype" in p for p in problems) and any("without a positive ms" in p for p in problems)


def _scaled(document, factor):
    scaled = copy.deepcopy(document)
    for row in scaled["rows"]:
        for pass_name in ("forward", "backward"):
            if row[pass_name]["status"] == "ok":
                row[pass_name]["ms"] *= factor
    return scaled


def test_a_regression_fails_and_an_improvement_passes(tiny_result, tmp_path):
    path, document = tiny_result
    slower, faster = tmp_path / "slower.json", tmp_path / "faster.json"
    slower.write_text(json.dumps(_scaled(document, 1.5)))
    faster.write_text(json.dumps(_scaled(document, 0.5)))
    judge_all = ["--min-ms", "0"]  # CPU timings of a tiny shape sit under the default noise floor
    assert main(["bench", "--input", str(slower), "--compare", str(path), *judge_all]) == exit_codes.FAILED
    assert main(["bench", "--input", str(faster), "--compare", str(path), *judge_all]) == exit_codes.OK
    # 1.5x slower is within a 60% threshold
    assert main(["bench", "--input", str(slower), "--compare", str(path), *judge_all,
                 "--threshold", "0.6"]) == exit_codes.OK


def test_unreadable_baseline_fails_before_running(tmp_path, capsys):
    assert main(["bench", *TINY, "--compare", str(tmp_path / "missing.json")]) == exit_codes.USAGE
    assert "missing.json" in capsys.readouterr().err


def test_passes_under_the_noise_floor_are_not_judged(tiny_result):
    _, document = tiny_result
    fastest = min(row["forward"]["ms"] for row in document["rows"] if row["forward"]["status"] == "ok")
    slowest = max(row[p]["ms"] for row in document["rows"] for p in ("forward", "backward")
                  if row[p]["status"] == "ok")
    assert compare_documents(_scaled(document, 3), document, 0.1, min_ms=fastest).regressions
    comparison = compare_documents(_scaled(document, 3), document, 0.1, min_ms=slowest * 1.01)
    assert comparison.regressions == [] and all("not judged" in line for line in comparison.lines)


def test_threshold_and_failures_in_comparison(tiny_result):
    _, document = tiny_result
    comparison = compare_documents(_scaled(document, 1.09), document, threshold=0.10)
    assert comparison.regressions == [] and comparison.compared == 4  # math: 2 masks x 2 passes
    broken = copy.deepcopy(document)
    broken["rows"][0]["forward"].update(status="oom", ms=None)
    assert len(compare_documents(broken, document, threshold=0.10).regressions) == 1
    skipped = copy.deepcopy(document)
    skipped["rows"][0]["forward"].update(status="skipped", ms=None)
    assert compare_documents(skipped, document, threshold=0.10).regressions == []


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_bench_without_a_gpu_says_so(capsys):
    assert main(["bench"]) == exit_codes.NO_GPU
    assert "no GPU" in capsys.readouterr().out


def test_plot_is_written_when_matplotlib_is_there(tiny_result, tmp_path, capsys):
    path, _ = tiny_result
    plot = tmp_path / "plot.png"
    assert main(["bench", "--input", str(path), "--plot", str(plot)]) == exit_codes.OK
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        assert "matplotlib not installed" in capsys.readouterr().out and not plot.exists()
    else:
        assert plot.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("flag, value", [("--min-reps", "0"), ("--max-reps", "-2"), ("--warmup", "-1"),
                                         ("--target-ms", "0"), ("--batch-ms", "nan"), ("--threshold", "-0.1")])
def test_a_setting_that_would_time_nothing_is_refused(capsys, flag, value):
    with pytest.raises(SystemExit) as stopped:
        main(["bench", *TINY, flag, value])
    assert stopped.value.code == exit_codes.USAGE
    assert f"argument {flag}: '{value}' is not a" in capsys.readouterr().err


def test_fewer_most_repetitions_than_least_is_refused_in_one_line(capsys):
    assert main(["bench", *TINY, "--min-reps", "30", "--max-reps", "5"]) == exit_codes.USAGE
    captured = capsys.readouterr()
    assert captured.err.strip() == ("rocm-stack-check bench: --min-reps 30 is more than --max-reps 5: pass a "
                                    "--min-reps no larger than --max-reps") and not captured.out


# Each mistake a user makes on the command line -> what its one line says. Before, a device, an output folder
# that is not there or a backend name went through to a traceback after the run, or to an empty table and exit 0.
MISTAKES = {
    (): "`rocm-stack-check` needs a command: check, bench",
    ("bench", "--device", "cuda:x"): "argument --device: 'cuda:x' is not a device: pass auto, cpu, cuda or cuda:N",
    ("bench", "--backend", "flash-attn"): "argument --backend: invalid choice: 'flash-attn'",
    ("bench", "--shape", "1,2,3"): "argument --shape: '1,2,3' is not a shape: pass four whole numbers",
    ("bench", "--dtype", "fp8"): "argument --dtype: invalid choice: 'fp8'",
    ("bench", "--output", "/nonexistent/x.json"): "folder /nonexistent does not exist",
    ("bench", "--plot", "/nonexistent/x.png"): "folder /nonexistent does not exist",
    ("check", "--output", "/nonexistent/x.json"): "folder /nonexistent does not exist",
    ("check", "--output", "/"): "'/' is a folder: pass a file name in it",
}


@pytest.mark.parametrize("arguments", MISTAKES, ids=" ".join)
def test_a_mistake_on_the_command_line_is_one_line_and_exit_2_before_anything_runs(capsys, arguments):
    with pytest.raises(SystemExit) as stopped:
        main(list(arguments))
    captured = capsys.readouterr()
    assert stopped.value.code == exit_codes.USAGE and not captured.out
    assert captured.err.count("\n") == 1 and MISTAKES[arguments] in captured.err, captured.err
    assert captured.err.startswith("rocm-stack-check") and "(see `rocm-stack-check" in captured.err


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without a GPU")
def test_a_gpu_device_without_a_gpu_says_so(capsys):
    assert main(["bench", "--device", "cuda:1", "--shape", "1,1,16,16"]) == exit_codes.NO_GPU
    assert "no GPU" in capsys.readouterr().out
