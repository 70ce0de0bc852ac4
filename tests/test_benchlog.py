"""The quick benchmark's results travel from a recipe's test section through the build log to
.orchestrate/logs/<log>.bench.json, and `orchestrate status` shows each architecture's latest."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from orchestrate import benchlog


def bench_document(arch: str, created: str, lowest: float, passed: bool = True) -> dict:
    """What `rocm-stack-check bench --quick --log-json` prints after its marker (the fields status reads,
    and rows enough to make the line as long as a real one)."""
    rows = [{"backend": b, "batch": 1, "heads": 16, "seq_len": 4096, "head_dim": 128, "dtype": d, "causal": True,
             "forward": {"status": "ok", "ms": 1.0}, "backward": {"status": "ok", "ms": 2.0}}
            for b in ("flash", "math") for d in ("fp16", "bf16")] * 10
    return {"schema": "rocm-stack-check/bench/1", "created": created, "expect_arch": arch,
            "platform": {"arch": arch, "device_name": "AMD Radeon 8060S"}, "rows": rows,
            "speedup": {"threshold": 3.0, "shape": "1,16,4096,128", "passed": passed, "results": []},
            "summary": f"flash {lowest:.1f}x over math at 1,16,4096,128 (lowest of fp16/bf16, fwd/bwd); "
                       + ("passed" if passed else "FAILED")}


def add_probe_recipe(workspace: Path, document: dict) -> None:
    """A tiny recipe whose test section prints the marked line, as the real recipes' bench line does on a GPU."""
    recipe = {
        "package": {"name": "bench-probe", "version": "1.0"},
        "build": {"noarch": "generic", "script": ["mkdir -p $PREFIX/share/bench-probe",
                                                  "touch $PREFIX/share/bench-probe/built"]},
        "tests": [{"script": ["echo 'running the quick benchmark'",
                              "echo '" + benchlog.MARKER + json.dumps(document) + "'"]}],
    }
    (workspace / "recipes" / "bench-probe").mkdir()
    (workspace / "recipes" / "bench-probe" / "recipe.yaml").write_text(yaml.safe_dump(recipe, width=10**6))


def test_a_recipe_tests_benchmark_is_kept_beside_its_log_and_status_shows_it(orchestrate, workspace):
    document = bench_document("gfx1151", "2026-11-25T12:00:00+00:00", 8.4)
    add_probe_recipe(workspace, document)
    result = orchestrate("build", "bench-probe", "--arch", "gfx1151", "-q")
    assert result.code == 0, result.out + result.err
    logs = workspace / ".orchestrate" / "logs"
    kept = list(logs.glob("bench-probe-*.bench.json"))
    assert len(kept) == 1 and (logs / kept[0].name.replace(benchlog.SUFFIX, ".log")).is_file()
    written = json.loads(kept[0].read_text())
    assert written["package"] == "bench-probe" and written["build_log"].endswith(".log")
    assert {k: v for k, v in written.items() if k not in ("package", "build_log")} == document

    status = orchestrate("status", "-q")
    assert status.code == 0
    line = next(line for line in status.out.splitlines() if line.strip().startswith("gfx1151:"))
    assert "flash 8.4x over math at 1,16,4096,128" in line and "passed" in line
    assert "bench-probe test" in line and "AMD Radeon 8060S" in line and "2026-11-25 12:00" in line


def test_status_shows_the_newest_per_architecture_and_skips_broken_files(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for name, document in [("pytorch-a-1", bench_document("gfx1151", "2026-11-25T10:00:00+00:00", 20.0)),
                           ("pytorch-b-2", bench_document("gfx1151", "2026-11-25T11:00:00+00:00", 1.1, passed=False)),
                           ("pytorch-c-3", bench_document("gfx942", "2026-11-24T09:00:00+00:00", 12.5))]:
        (logs / f"{name}.log").write_text("== test\n │ " + benchlog.MARKER + json.dumps(document) + "\n")
        assert benchlog.collect(logs / f"{name}.log", "pytorch") == logs / f"{name}{benchlog.SUFFIX}"
    (logs / f"cut-short{benchlog.SUFFIX}").write_text('{"created": ')
    lines = benchlog.summary_lines(logs)
    assert len(lines) == 3
    assert "gfx1151: flash 1.1x" in lines[1] and "FAILED" in lines[1]  # the newer of the two gfx1151 runs
    assert "gfx942: flash 12.5x" in lines[2]


def test_a_log_without_a_benchmark_keeps_nothing(tmp_path):
    log = tmp_path / "aotriton-x-1.log"
    log.write_text("rocm-stack-check bench: no GPU: PyTorch not importable; quick benchmark skipped\n"
                   + benchlog.MARKER + '{"schema": "cut sh\n')
    assert benchlog.collect(log, "aotriton") is None
    assert list(tmp_path.iterdir()) == [log]
    assert benchlog.summary_lines(tmp_path) == []


def test_the_marker_is_the_tools_own():
    from rocm_stack_check.quick import LOG_MARKER

    assert benchlog.MARKER == LOG_MARKER
