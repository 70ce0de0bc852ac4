"""The installed size of the default `pytorch` environment, before and after the devel split (issue 38).

    python tests/benchmarks/env_size.py [--scale 8] [--before REV]

Both environments are built here by the orchestrator from the real recipes/rocm-sdk and recipes/rocm-sdk-device:
"before" with recipes/rocm-sdk as it was at --before (one rocm-sdk package holding core, libraries and the
expanded devel tree), "after" with the working tree's (rocm-sdk holds rocm[libraries], rocm-sdk-devel the tree).
The AMD wheels are tests/prebuilt_helpers.py's stand-ins with TheRock's layout (_rocm_sdk_core, _rocm_sdk_libraries,
rocm_sdk_devel/_devel.tar expanding to _rocm_sdk_devel with relative symlinks into the runtime trees), each padded
with one file to the size below divided by --scale; `pytorch` is a stand-in of AMD's torch host wheel's size whose
run requirements are those the real recipes give the `pytorch` package for gfx1151 (read from the plan). The
environment is what rattler solves and installs for `pytorch` on a gfx1151 machine; its size is the sum of its
files' sizes (symlinks count as links, as on disk). Full-size figures are the measured ones times --scale.

The sizes are published compressed wheel sizes, so the unpacked environment is larger than the figures here:
- rocm[libraries] for gfx1151 on Linux, 0.47 GiB, and rocm[libraries,devel], 1.81 GiB (so devel 1.34 GiB): ROCm 7.10.0
  release wheels, measured in ROCm/rocm-cli issue 164 (2026-08-03), https://github.com/ROCm/rocm-cli/issues/164;
- AMD's torch host wheel after the kpack split, 431 MB (torch 2.10.0+rocm7.1, stellaraccident's split report,
  2026-03-10, https://gist.github.com/stellaraccident/105d58437d903218c476594c2ba33cce);
- the device wheels (rocm-sdk-device-gfx1151, torch's) are left at the stand-ins' few bytes: they are the same
  before and after.
A benchmark, not a test: tests/test_devel_split.py and tests/test_rocm_sdk_split.py hold the split in the suite.
Writes tests/benchmarks/results/env-size.json and .md.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from prebuilt_helpers import make_index  # noqa: E402
from source_helpers import CountingServer  # noqa: E402
from stack import install  # noqa: E402
from test_rocm_sdk_split import ARCHS, PYTHON_STAND_IN, _orchestrate, _write_lock, real_recipes_workspace  # noqa: E402

ARCH, ISA = "gfx1151", "11.5.1"
GIB, MB = 1 << 30, 10 ** 6
SIZES = {  # full-size bytes of each stand-in's padding (the module doc gives the sources)
    "runtime": int(0.47 * GIB),  # rocm-sdk-core + rocm-sdk-libraries
    "devel": int(1.34 * GIB),  # rocm-sdk-devel
    "torch": 431 * MB,  # AMD's torch host wheel
}
PYTORCH_STAND_IN = """package: {{name: pytorch, version: "2.14.0"}}
build:
  noarch: generic
  script:
    - mkdir -p $PREFIX/lib/python3.12/site-packages/torch/lib
    - head -c {size} /dev/zero > $PREFIX/lib/python3.12/site-packages/torch/lib/libtorch_hip.so
requirements:
  run:
{run}
"""


def pytorch_run_requirements() -> list[str]:
    """The SDK requirements the real recipes give the `pytorch` package for ARCH (the default, prebuilt path)."""
    from orchestrate import runner
    from orchestrate.options import Options
    from orchestrate.resolve import requirement_spec
    options = Options(workspace=REPO, channel=Path("/nonexistent/channel"), arch=ARCH, source_channels=[])
    found = set()
    for step in runner.make_plan(options).steps:
        if step.output.name == "pytorch":
            found |= {requirement_spec(s) for s in step.output.rendered["requirements"].get("run") or []
                      if requirement_spec(s).startswith("rocm-sdk")}
    return sorted(found)


def pad(wheel: Path, member: str, size: int) -> None:
    """Add one file of `size` zero bytes to a stand-in wheel, written in chunks."""
    with zipfile.ZipFile(wheel, "a", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open(zipfile.ZipInfo(member), "w", force_zip64=True) as out:
            chunk = bytes(1 << 20)
            for offset in range(0, size, len(chunk)):
                out.write(chunk[: min(len(chunk), size - offset)])


def sizes_by_package(prefix: Path) -> dict[str, int]:
    sizes = {}
    for record in (prefix / "conda-meta").glob("*.json"):
        meta = json.loads(record.read_text())
        sizes[meta["name"]] = sum(os.lstat(prefix / f).st_size for f in meta.get("files", []))
    return dict(sorted(sizes.items()))


def build_and_install(workspace: Path, channel: Path, prefix: Path) -> dict[str, int]:
    result = _orchestrate(workspace, "build", "pytorch", "--arch", ARCH, "--no-tests", "--channel", str(channel))
    if result.returncode:
        raise SystemExit(result.stdout[-3000:] + result.stderr[-3000:])
    install(channel, ["pytorch"], ISA, prefix)
    return sizes_by_package(prefix)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=int, default=8, help="build stand-ins at 1/SCALE of the sizes")
    parser.add_argument("--before", default="8e5b5e2", help="the commit whose recipes/rocm-sdk is 'before'")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    run = "\n".join(f"    - {spec}" for spec in pytorch_run_requirements())
    with tempfile.TemporaryDirectory(prefix="env-size-") as tmp:
        root = Path(tmp)
        stand_ins = {"python": PYTHON_STAND_IN.format(python=sys.executable),
                     "pytorch": PYTORCH_STAND_IN.format(size=SIZES["torch"] // args.scale, run=run)}
        workspace = real_recipes_workspace(root, ("rocm-sdk", "rocm-sdk-device"), stand_ins)
        index = make_index(root / "index", list(ARCHS))
        pad(index.files["rocm_sdk_core"], "_rocm_sdk_core/lib/librocm_standin.so", SIZES["runtime"] // args.scale)
        pad(index.files["rocm_sdk_devel"], "_rocm_sdk_devel/lib/libdevel_standin.a", SIZES["devel"] // args.scale)
        results = {}
        with CountingServer(index.root) as server:
            index.url = server.url + "/"
            _write_lock(workspace, index)
            results["after"] = build_and_install(workspace, root / "channel-after", root / "env-after")
            recipe = workspace / "recipes/rocm-sdk"
            for name in ("recipe.yaml", "build.sh", "activate.sh", "deactivate.sh"):
                (recipe / name).write_bytes(subprocess.run(["git", "show", f"{args.before}:recipes/rocm-sdk/{name}"],
                                                           cwd=REPO, check=True, capture_output=True).stdout)
            results["before"] = build_and_install(workspace, root / "channel-before", root / "env-before")
    totals = {k: sum(v.values()) for k, v in results.items()}
    report = {"scale": args.scale, "sizes_full": SIZES, "pytorch_run_requirements": run.split(),
              "packages_measured": results, "total_measured": totals,
              "total_full_gib": {k: round(v * args.scale / GIB, 2) for k, v in totals.items()}}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "env-size.json").write_text(json.dumps(report, indent=2) + "\n")
    before, after = (totals["before"] * args.scale / GIB, totals["after"] * args.scale / GIB)
    lines = [f"# The default `pytorch` environment's installed size, before and after the devel split",
             "", f"`python tests/benchmarks/env_size.py --scale {args.scale} --before {args.before}`: stand-ins at "
             f"1/{args.scale} of published compressed wheel sizes (the script's doc gives them and their sources), "
             f"installed for `pytorch` on {ARCH}; full-size figures are the measured ones times {args.scale}.", "",
             "| package | before | after |", "|---|---|---|"]
    for name in sorted(set(results["before"]) | set(results["after"])):
        cell = lambda k: f"{results[k][name] * args.scale / GIB:.2f} GiB" if name in results[k] else "-"  # noqa: E731
        lines.append(f"| {name} | {cell('before')} | {cell('after')} |")
    lines += [f"| **total** | **{before:.2f} GiB** | **{after:.2f} GiB** |", "",
              f"The environment shrinks by {before - after:.2f} GiB ({(before - after) / before:.0%})."]
    (args.out / "env-size.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
