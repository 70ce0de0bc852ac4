"""A cache hit costs the download, not a build: time `build-all` for the test graph against an empty
remote cache and against a warm one (everything published), both on an S3-compatible server (moto) on
127.0.0.1 that this script starts and stops.

    python tests/benchmarks/share_cache.py [--runs 3]

Writes tests/benchmarks/results/share-cache.json and .md. The test graph's builds take ~0.1 s each, so
on it the two are close; the point is that the warm run builds nothing (10 from cache), which for the
real stack replaces hours of PyTorch + aotriton compiles by a download.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
from share_helpers import S3_ENV, build_channel, make_workspace, moto_server, orchestrate, s3_client  # noqa: E402

BUCKET = "bench"


def timed_build(workspace: Path, channel: Path, cache: str, env: dict) -> tuple[float, str]:
    started = time.perf_counter()
    result = build_channel(workspace, channel, "--cache-channel", cache, env=env)
    seconds = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"build-all failed: {result.stderr}")
    summary = result.stdout.strip().splitlines()[-1]
    return seconds, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    cold, warm = [], []
    with tempfile.TemporaryDirectory() as tmp, moto_server() as endpoint:
        root = Path(tmp)
        workspace = make_workspace(root)
        s3_client(endpoint).create_bucket(Bucket=BUCKET)
        env = {**S3_ENV, "AWS_ENDPOINT_URL": endpoint}
        for run in range(args.runs):
            empty, full = f"s3://{BUCKET}/empty-{run}", f"s3://{BUCKET}/full-{run}"
            seconds, cold_summary = timed_build(workspace, root / f"cold-{run}", empty, env)
            cold.append(seconds)
            published = orchestrate("publish", "--workspace", str(workspace), "--channel", str(root / f"cold-{run}"),
                                    "--to", full, env=env)
            if published.returncode != 0:
                raise SystemExit(f"publish failed: {published.stderr}")
            seconds, warm_summary = timed_build(workspace, root / f"warm-{run}", full, env)
            warm.append(seconds)
    record = {
        "what": "orchestrate build-all --arch gfx1151 --no-tests, test graph (10 packages), cache on moto S3 at 127.0.0.1",
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "runs": args.runs,
        "empty_cache_s": [round(s, 3) for s in cold],
        "warm_cache_s": [round(s, 3) for s in warm],
        "empty_cache_median_s": round(statistics.median(cold), 3),
        "warm_cache_median_s": round(statistics.median(warm), 3),
        "empty_cache_summary": cold_summary,
        "warm_cache_summary": warm_summary,
    }
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    (results / "share-cache.json").write_text(json.dumps(record, indent=1) + "\n")
    (results / "share-cache.md").write_text(
        f"# build-all with an empty vs a warm remote cache\n\n{record['what']}; {record['machine']['cpus']} CPUs, "
        f"{record['machine']['platform']}; {record['date']}.\n\n"
        "| remote cache | median wall time | runs | result |\n|---|---|---|---|\n"
        f"| empty | {record['empty_cache_median_s']:.2f} s | {record['empty_cache_s']} | {cold_summary} |\n"
        f"| warm | {record['warm_cache_median_s']:.2f} s | {record['warm_cache_s']} | {warm_summary} |\n"
    )
    print(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
