"""A channel as two machines leave it after publishing the test graph, written file by file (repodata.json,
lookup entries, bench documents) so the page tests need no build; and headless Chromium to look at a page.

gfx942 has two builds, each tested by pytorch's and flash-attn's quick benchmark, the second build slower (a
regression); gfx1151 two builds within the threshold; gfx90a has packages but no GPU ran their tests (not
measured)."""
from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
from pathlib import Path

from orchestrate.channel import ManifestEntry
from orchestrate.recipes import derived_variant_keys
from orchestrate.share.lookup import encode_entry, entry_path
from orchestrate.yaml_files import read_mapping
from rocm_stack_check import __version__ as CHECK_VERSION

REPO = Path(__file__).resolve().parent.parent
H100_BENCH = REPO / "tests" / "benchmarks" / "results" / "h100-quick-bench.json"
ISA = {"gfx1151": "11.5.1", "gfx942": "9.4.2", "gfx90a": "9.0.10"}
PINS = read_mapping(REPO / "variants" / "shared.yaml")  # the project's current pins, so the page shows today's stack
GPU_PACKAGES = {"rocm-sdk": PINS["rocm_sdk_version"][0], "pytorch": PINS["prebuilt_pytorch_version"][0],
                "flash-attn": PINS["flash_attn_version"][0], "vllm": PINS["vllm_version"][0],
                "rocm-stack": PINS["prebuilt_pytorch_version"][0]}  # rocm-stack takes torch's version (its recipe)
ROCM_TAG = derived_variant_keys(PINS)["rocm_tag"]
SLOWER = 0.6  # the edited copy: every fused result at 60% of the real one's speed
DAY = 86400
START = 1_795_000_000  # 2026-11-18, a week before the session


def scaled_copy(document: dict, speed: float) -> dict:
    """The document with every fused backend at `speed` times its speed (math unchanged)."""
    scaled = copy.deepcopy(document)
    for row in scaled["rows"]:
        if row["backend"] != "math":
            for name in ("forward", "backward"):
                if row[name]["status"] == "ok":
                    row[name]["ms"] /= speed
                    row[name]["tflops"] *= speed
    for result in scaled["speedup"]["results"]:
        result["speedup"] = round(result["speedup"] * speed, 2)
    return scaled


def slower_copy(document: dict) -> dict:
    """The real document with every fused backend 40% slower (math unchanged)."""
    return scaled_copy(document, SLOWER)


def build_string(arch: str, run: int, day: int) -> str:
    return f"{ROCM_TAG}_{arch}_py312_h{run:02d}{day:02d}abcdef_0"


def _record(name: str, version: str, build: str, arch: str | None, when: float) -> dict:
    depends = [f"__amdgpu_arch =={ISA[arch]}"] if arch else []
    return {"name": name, "version": version, "build": build, "build_number": 0, "depends": depends,
            "subdir": "linux-64" if arch else "noarch", "timestamp": int(when * 1000), "md5": "0" * 32,
            "sha256": "0" * 64, "size": 1000}


def _write(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1))


TESTED = ("pytorch", "flash-attn")  # the recipes whose tests run the quick benchmark, in the order they finish


def write_channel(root: Path) -> Path:
    """The channel folder; bench documents as `bench/<arch>/<package file stem>.json`, one per tested package and
    build, as a GPU build-all leaves them; plus the result of a pytorch build the channel no longer lists."""
    real = json.loads(H100_BENCH.read_text())
    repodata = {"linux-64": {}, "noarch": {}}
    runs = {"gfx942": [real, slower_copy(real)], "gfx1151": [real, real], "gfx90a": []}
    for day, arch in enumerate(("gfx1151", "gfx942", "gfx90a")):
        for run, document in enumerate(runs[arch] or [None]):
            when = START + (day + run * 3) * DAY
            build = build_string(arch, run, day)
            for name, version in GPU_PACKAGES.items():
                file = f"{name}-{version}-{build}.conda"
                repodata["linux-64"][file] = _record(name, version, build, arch, when)
                entry = ManifestEntry(file=f"linux-64/{file}", name=name, version=version, build=build, arch=arch,
                                      slot=name, input_hash=f"{run}{day}" + "f" * 62, sha256="0" * 64, digests={},
                                      dependency_hashes={}, patches=[], built_at=when, host=f"builder-{arch}")
                _write(root / entry_path(entry.file), json.loads(encode_entry(entry)))
            for minutes, name in zip((0, 30), TESTED if document is not None else ()):
                _write_bench(root, arch, f"{name}-{GPU_PACKAGES[name]}-{build}",
                             document, f"2026-11-{18 + day + run * 3:02d}T12:{minutes:02d}:00+00:00")
    # a pytorch build replaced since (its package moved to .superseded/; its result stays, create-only)
    _write_bench(root, "gfx1151", f"pytorch-{GPU_PACKAGES['pytorch']}-{build_string('gfx1151', 9, 0)}",
                 slower_copy(real), "2026-11-17T12:00:00+00:00")
    repodata["noarch"][f"rocm-stack-check-{CHECK_VERSION}-pyh0_0.conda"] = _record(
        "rocm-stack-check", CHECK_VERSION, "pyh0_0", None, START)
    for subdir, packages in repodata.items():
        _write(root / subdir / "repodata.json",
               {"info": {"subdir": subdir}, "packages": {}, "packages.conda": packages})
    return root


def _write_bench(root: Path, arch: str, stem: str, document: dict, created: str) -> None:
    _write(root / "bench" / arch / f"{stem}.json", {**copy.deepcopy(document), "created": created,
                                                     "package": f"{stem}.conda", "subdir": "linux-64",
                                                     "build": stem.rsplit("-", 1)[1]})


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def run_chromium(url: str, *flags: str, width: int = 1280, height: int = 900, cwd: Path | None = None,
                 timeout: int = 60) -> subprocess.CompletedProcess:
    """Headless Chromium on one URL; its console messages go to stderr (--enable-logging=stderr)."""
    command = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-dev-shm-usage", "--hide-scrollbars", f"--window-size={width},{height}",
               "--enable-logging=stderr", "--v=0", f"--user-data-dir={cwd or Path.cwd()}/chromium-profile",
               *flags, url]
    env = {**os.environ, "HOME": str(cwd or Path.cwd())}
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


def docs_screenshots(images: Path, work: Path) -> list[Path]:
    """docs/images/channel-page-*.png: the test channel's page at desktop width (its top) and at phone width (the
    architecture with the regression). `python tests/page_helpers.py docs/images` makes them again."""
    from orchestrate.cli import main

    channel = write_channel(work / "channel")
    if main(["page", "--workspace", str(REPO), "--channel", str(channel), "--url", "http://buildbox:8765", "-q"]):
        raise SystemExit("orchestrate page failed")
    page = (channel / "index.html").read_text()
    start = page.index('<section class="arch" id="arch-gfx942">')
    body_start = page.index('<main class="wrap">') + len('<main class="wrap">')
    one = channel / "gfx942.html"  # the page with only that section, so the phone shot shows it from its top
    one.write_text(page[:body_start] + page[start:page.index("</section>", start)] + page[page.index("</main>"):])
    shots = [(channel / "index.html", images / "channel-page-desktop.png", 1100, 1000),
             (one, images / "channel-page-phone.png", 390, 2350)]
    for source, target, width, height in shots:
        done = run_chromium(source.as_uri(), f"--screenshot={target.resolve()}", width=width, height=height, cwd=work)
        if done.returncode:
            raise SystemExit(done.stderr[-2000:])
    return [target for _, target, _, _ in shots]


if __name__ == "__main__":
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        print("\n".join(str(p) for p in docs_screenshots(Path(sys.argv[1]), Path(scratch))))
