"""The numbers issue 15 asks for, computed from `orchestrate plan` over the real recipes (their declared
extra.estimate; no build runs): the default gfx1151 plan's expected time, the same with
--variant pytorch_from=source, and the channel bytes for all architectures, SDK and PyTorch, from the
packages the plans would put in a channel (a package whose name, version and build string are the same for
every architecture is one file in the channel, counted once).

Run from the repository root:  python tests/benchmarks/plan_numbers.py [--write | --docs]
--write saves tests/benchmarks/results/plan_numbers.md (re-run it after the recipes change); --docs rewrites the
numbers README.md, docs/getting-started.md and docs/prebuilt-or-source.md state (a test fails while they differ from `plan`)."""
from __future__ import annotations

import argparse
import datetime
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from orchestrate import runner  # noqa: E402
from orchestrate.architectures import ArchitectureTable  # noqa: E402
from orchestrate.ui import GIB, format_duration  # noqa: E402
from orchestrate.options import Options  # noqa: E402

RESULTS = REPO / "tests" / "benchmarks" / "results" / "plan_numbers.md"
SDK_PREFIX = "rocm-sdk"
TORCH_NAMES = ("pytorch", "pytorch-base", "pytorch-rocm", "torchvision", "torchaudio", "torchvision-rocm",
               "torchaudio-rocm", "triton", "triton-rocm", "aotriton")
# AMD's own figures (shared/reference/rocm-stack.md §1.2, from TheRock RELEASES.md): the wheels of the split.
AMD_DOCUMENTED_GIB = {"rocm-sdk-core": 0.7, "rocm-sdk-libraries": 0.1, "rocm-sdk-device (each)": 0.05,
                      "torch host": 0.1, "amd-torch-device (each)": 0.05}
# The per-family tarball we repackaged before the split: gfx1151 10.0.0 is 1,794,376,103 bytes (issue 15's lead,
# one public script); our rocm-sdk recipe declared package_gib 2.5.
PER_FAMILY_TARBALL_GIB = 1_794_376_103 / GIB


def plan(arch: str, overrides: dict[str, str] | None = None, everything: bool = False) -> runner.Plan:
    options = Options(workspace=REPO, channel=Path("/nonexistent/plan-numbers-channel"), arch=arch,
                      source_channels=[], variant_overrides=dict(overrides or {}))
    return runner.make_plan(options, everything=everything)


def time_rows(p: runner.Plan) -> tuple[list[list[str]], float, int]:
    rows = []
    for step in p.steps:
        if step.state != runner.BUILD:
            continue
        minutes = step.estimate.seconds / 60 if step.estimate and step.estimate.seconds is not None else None
        rows.append([step.output.name, step.output.build_string, step.origin,
                     f"{minutes:.0f}m" if minutes is not None else "?"])
    total, unknown = runner.expected_total(p)
    return rows, total, unknown


def channel_bytes(archs: list[str], overrides: dict[str, str] | None = None) -> dict[str, float]:
    """GiB a channel holding every architecture's plan would carry, by group, each distinct file once."""
    files: dict[tuple, tuple[str, float]] = {}
    for arch in archs:
        for step in plan(arch, overrides, everything=True).steps:
            if step.state != runner.BUILD or not step.estimate:
                continue
            o = step.output
            group = "SDK" if o.name.startswith(SDK_PREFIX) else "PyTorch" if o.name in TORCH_NAMES else "other"
            files[(o.name, o.version, o.build_string)] = (group, step.estimate.package_bytes / GIB)
    totals: dict[str, float] = {"SDK": 0.0, "PyTorch": 0.0, "other": 0.0}
    for group, gib in files.values():
        totals[group] += gib
    totals["files"] = len(files)
    return totals


def per_architecture(archs: list[str]) -> list[str]:
    """The default plan (`build-all`) of every architecture: its flash-attn backend and the expected total."""
    rows = []
    for arch in archs:
        p = plan(arch)
        flash = [s.output.build_string for s in p.steps if s.output.name.startswith("flash-attn") and s.state == runner.BUILD]
        backend = ArchitectureTable.load(REPO / "variants").get(arch).flash_attn_default or "none"
        minutes = next((s.estimate.seconds / 60 for s in p.steps if s.output.name.startswith("flash-attn")
                        and s.state == runner.BUILD and s.estimate), 0)
        _, total, unknown = time_rows(p)
        rows.append([arch, backend + (f" ({minutes:.0f}m)" if flash else ""),
                     str(sum(1 for s in p.steps if s.state == runner.BUILD)),
                     format_duration(total) + (f" ({unknown} without an estimate)" if unknown else "")])
    return ["## Default plan per architecture (`orchestrate plan --arch ARCH`)", "",
            "flash-attn is in the default build where the architecture has a backend: the first of the table's "
            "`flash_attn_default` order it supports (Triton, else CK); the other backend is built on request.", "",
            table(["arch", "flash-attn backend (its build)", "builds", "expected"], rows), ""]


def table(header: list[str], rows: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
                     + ["| " + " | ".join(r) + " |" for r in rows])


def report() -> str:
    archs = ArchitectureTable.load(REPO / "variants").names()
    n = len(archs)
    default = plan("gfx1151")
    source = plan("gfx1151", {"pytorch_from": "source"})
    everything_source = plan("gfx1151", {"pytorch_from": "source"}, everything=True)
    out = [f"# Plan numbers (tests/benchmarks/plan_numbers.py, {datetime.date.today().isoformat()})", "",
           "Method: `runner.make_plan` over this tree's recipes for gfx1151 with an empty channel, so every package "
           "in the plan is a build and its expected time is the recipe's declared `extra.estimate.build_minutes` "
           "(what `orchestrate plan` prints). Re-run after the recipes change: "
           "`python tests/benchmarks/plan_numbers.py --write`.", ""]
    if not any(s.origin.startswith("prebuilt") for s in default.steps):
        out += ["**No recipe in this tree downloads AMD's prebuilt artifacts yet** (the split recipes are not merged): "
                "the numbers below are the source path's; the target is a default gfx1151 plan of at most 1h30m.", ""]
    for title, p in (("Default plan: `orchestrate plan --arch gfx1151` (rocm-stack's closure)", default),
                     ("`--variant pytorch_from=source` (rocm-stack's closure)", source),
                     ("Every recipe with PyTorch from source (`plan --all --variant pytorch_from=source`, "
                      "what `build-all` built before this change)", everything_source)):
        rows, total, unknown = time_rows(p)
        out += [f"## {title}", "", table(["package", "build", "from", "expected"], rows), "",
                f"**{len(rows)} builds, expected {format_duration(total)}**"
                + (f" ({unknown} without an estimate)" if unknown else ""), ""]
    out += per_architecture(archs)
    prebuilt_bytes, source_bytes = channel_bytes(archs), channel_bytes(archs, {"pytorch_from": "source"})
    docs = AMD_DOCUMENTED_GIB
    out += [f"## Channel bytes for all {n} architectures", "",
            "From the recipes: each distinct package file of the {n} plans (`plan --all`), its declared "
            "`extra.estimate.package_gib`; a file with the same name, version and build string on every "
            "architecture (an arch-neutral host package) is counted once.".replace("{n}", str(n)), "",
            table(["path", "SDK GiB", "PyTorch GiB (torch, vision, audio, triton, aotriton)", "package files"], [
                ["pytorch_from=prebuilt (default)", f"{prebuilt_bytes['SDK']:.2f}", f"{prebuilt_bytes['PyTorch']:.2f}",
                 str(prebuilt_bytes["files"])],
                ["pytorch_from=source", f"{source_bytes['SDK']:.2f}", f"{source_bytes['PyTorch']:.2f}",
                 str(source_bytes["files"])]]), "",
            "From AMD's documented sizes (the layout before and after the split, independent of our recipes):", "",
            table(["", "SDK", "PyTorch", "source of the figures"], [
                [f"before: {n} per-family SDKs, torch built from source",
                 f"{n} × {PER_FAMILY_TARBALL_GIB:.2f}–2.5 GiB = {n * PER_FAMILY_TARBALL_GIB:.1f}–{n * 2.5:.0f} GiB",
                 f"{n} × 1.5 GiB = {n * 1.5:.0f} GiB",
                 "gfx1151 10.0.0 tarball 1,794,376,103 bytes (issue 15 lead); rocm-sdk recipe package_gib 2.5; "
                 "pytorch-rocm recipe package_gib 1.5"],
                [f"after: one host + {n} device packages",
                 f"{docs['rocm-sdk-core']} + {docs['rocm-sdk-libraries']} + {n} × {docs['rocm-sdk-device (each)']} = "
                 f"{docs['rocm-sdk-core'] + docs['rocm-sdk-libraries'] + n * docs['rocm-sdk-device (each)']:.2f} GiB "
                 "(+ devel, not documented)",
                 f"{docs['torch host']} + {n} × {docs['amd-torch-device (each)']} = "
                 f"{docs['torch host'] + n * docs['amd-torch-device (each)']:.2f} GiB",
                 "rocm-stack.md §1.2 (TheRock RELEASES.md): core ~700 MB, libraries ~100 MB, device ~50 MB each; "
                 "torch host ~100 MB + amd-torch-device ~50 MB"]]), ""]
    return "\n".join(out)


# The numbers README.md, docs/getting-started.md and docs/prebuilt-or-source.md state, between <!-- plan-numbers:NAME --> and
# <!-- /plan-numbers:NAME -->: written by `--docs`, and tests/test_user_paths.py fails when they differ from `plan`.
DOC_PAGES = ("README.md", "docs/getting-started.md", "docs/prebuilt-or-source.md")
WHEELS = ("prebuilt wheel", "PyPI wheel")


def doc_blocks() -> dict[str, str]:
    """NAME -> the text of each marked block, from the default plans of every architecture and gfx1151's plans."""
    table_ = ArchitectureTable.load(REPO / "variants")
    groups: dict[tuple, list[str]] = {}
    for arch in table_.names():
        p = plan(arch)
        flash = next((s for s in p.steps if s.output.name == "flash-attn" and s.state == runner.BUILD), None)
        backends = table_.get(arch).flash_attn_backends
        if flash is None:
            backend = "none (no backend supports it)"
        else:
            name = flash.output.variant.get("flash_attn_backend", "")
            label = {"ck": "CK", "triton": "Triton"}.get(name, name)
            only = ", their only one" if len(backends) == 1 else ""
            backend = f"{label} backend{only} ({format_duration(flash.estimate.seconds)})"
        builds = sum(1 for s in p.steps if s.state == runner.BUILD)
        groups.setdefault((backend, builds, format_duration(runner.expected_total(p)[0])), []).append(arch)
    per_arch = [["architectures", "flash-attn in the default build", "builds", "expected"]]
    per_arch += [[", ".join(archs), backend, str(builds), total] for (backend, builds, total), archs in groups.items()]
    default, source = plan("gfx1151"), plan("gfx1151", {"pytorch_from": "source"})
    everything = plan("gfx1151", {"pytorch_from": "source"}, everything=True)
    ck_total = next(total for (backend, _, total) in groups if backend.startswith("CK backend, their only one"))

    def builds_of(p: runner.Plan) -> list:
        return [s for s in p.steps if s.state == runner.BUILD]

    wheels = sum(1 for s in builds_of(default) if s.origin in WHEELS)
    gfx1151 = [["plan for gfx1151 (empty channel)", "builds", "expected"],
               ["default: rocm-stack's closure, PyTorch prebuilt", f"{len(builds_of(default))} ({wheels} of them "
                "repackage a wheel)", f"**{format_duration(runner.expected_total(default)[0])}**"],
               ["rocm-stack's closure, `--variant pytorch_from=source` (the full source graph: Triton with its LLVM, "
                "aotriton, PyTorch, torchvision, torchaudio)", str(len(builds_of(source))),
                format_duration(runner.expected_total(source)[0])],
               ["every recipe, PyTorch from source (`plan --all --variant pytorch_from=source`: what `build-all` built "
                "before ROCm 10.1)", str(len(builds_of(everything))), format_duration(runner.expected_total(everything)[0])]]
    default_total, source_total = runner.expected_total(default)[0], runner.expected_total(source)[0]
    return {"readme": f"{format_duration(default_total)} as `plan` sums the recipes' declared estimates, against "
                      f"{format_duration(source_total)} for the same closure with PyTorch from source; {ck_total} on the "
                      "architectures whose only flash-attn backend is CK",
            "headline": f"{format_duration(default_total)} instead of {format_duration(source_total)} with PyTorch built "
                        "from source (the same closure; both as `plan` sums the recipes' declared estimates)",
            "source-extra": f"{format_duration(source_total - default_total)} more, as `plan` sums the recipes' "
                            "declared estimates",
            "per-architecture": "\n" + table(per_arch[0], per_arch[1:]) + "\n",
            "gfx1151": "\n" + table(gfx1151[0], gfx1151[1:]) + "\n",
            "estimates": "\n" + estimates_table() + "\n",
            "disk": disk_sentence(default),
            DOCTOR_SAMPLE: disk_sentence(default).split(":")[0]}


# Each package's public figures, beside what its recipe declares (the declared column is read from the recipes):
# (names in the plan, the public figure, where it is published). Nothing here was measured on an AMD GPU.
PUBLIC_FIGURES = [
    (("rocm-sdk", "rocm-sdk-device-gfx1151"), "download and unpack: core ~700 MB, libraries ~100 MB, devel, device "
     "~50–130 MB; a few GB unpacked", "TheRock RELEASES.md; a measured note on the 10.0.0 wheels"),
    (("pytorch-base", "pytorch", "torchvision", "torchaudio", "triton"), "download and unpack: torch ~110 MB + device "
     "~50 MB (+ family wheel ~180 MB)", "the same measured note"),
    (("triton",), "about an hour (its LLVM dominates); LLVM links 4–8 GB RAM each", "TheRock docs"),
    (("aotriton",), "about 30 min for one target on 32 threads (22,000 files); declared: × 32 / 16 jobs = 1h00m",
     "gentoo/gentoo PR #42907 (2025-07-06)"),
    (("pytorch",), "30–60 min (single target); OOM with 8 jobs on 32 GB", "TheRock pytorch README, conda feedstock"),
    (("composable-kernel",), "gfx1151, library plus examples and tests: about 1.5 h with 32 jobs, declared × 32 / 16 = "
     "3h00m; gfx942, library plus MHA: ~1h30m on 128 threads, declared × 128 / 16 = 12h00m on the MHA targets",
     "lhl strix-halo-testing torch-therock/BUILD.md (2025); ROCm/composable_kernel PR #2225 (2025-05-22)"),
    (("flash-attn",), "not published", ""),
    (("aiter",), "minutes (kernels JIT-compiled on first use; `AITER_PREBUILD_KERNELS` to prebuild)", "aiter setup.py"),
    (("vllm",), "5–10 min for one architecture (`setup.py develop`)", "vLLM's ROCm install docs"),
]


def _declared(step) -> str:
    e = step.estimate
    return (f"{format_duration(e.seconds)}; disk {e.disk_bytes / GIB:g} GiB, package {e.package_bytes / GIB:g} GiB, "
            f"sources {e.source_bytes / GIB:g} GiB")


def estimates_table() -> str:
    """Per package: what its recipe declares (`plan`'s figures, gfx1151) beside the public figures."""
    steps = {}
    for overrides in ({}, {"pytorch_from": "source"}, {"flash_attn_backend": "ck"}):
        for step in plan("gfx1151", overrides, everything=True).steps:
            if step.state == runner.BUILD and step.estimate:
                backend = step.output.variant.get("flash_attn_backend", "")
                steps.setdefault((step.output.name, backend, step.origin), step)
    rows = []
    for names, public, source in PUBLIC_FIGURES:
        declared = []
        for (name, backend, origin), step in steps.items():
            if name in names and (len(names) > 1) == origin.startswith("prebuilt"):
                label = f"{name} ({backend})" if backend else name
                declared.append(f"{label}: {_declared(step)}")
        rows.append([", ".join(names) + (" (prebuilt)" if len(names) > 1 else " (source)" if names[0] in
                                          ("triton", "pytorch") else ""), "<br>".join(declared), public, source])
    return table(["package", "declared by its recipe (`plan`, gfx1151)", "public figure", "published in"], rows)


def disk_sentence(default: runner.Plan) -> str:
    """What doctor's disk line adds up for the default gfx1151 plan, nothing built or cached yet, one disk."""
    options = Options(workspace=REPO, channel=Path("/nonexistent/plan-numbers-channel"), arch="gfx1151",
                      source_channels=[], source_cache=Path("/nonexistent/plan-numbers-sources"))
    needs = runner.plan_disk_needs(default, options)
    total = sum(n.bytes for n in needs)
    return f"{total / GIB:.1f} GiB: " + "; ".join(part for n in needs for part in n.parts)


# doctor's sample output in getting-started shows the same sum inside a code block, where no marker can go.
DOCTOR_SAMPLE = "doctor-sample"
DOCTOR_SAMPLE_PATTERN = re.compile(r"(plan needs about )([0-9.]+ GiB)( \(…\))")


def marked(name: str) -> re.Pattern:
    if name == DOCTOR_SAMPLE:
        return DOCTOR_SAMPLE_PATTERN
    return re.compile(rf"(<!-- plan-numbers:{name} -->)(.*?)(<!-- /plan-numbers:{name} -->)", re.S)


def docs_as_written() -> dict[str, str]:
    """NAME -> the block's text as the pages hold it (each block once, over DOC_PAGES)."""
    found = {}
    for page in DOC_PAGES:
        for match in re.finditer(r"<!-- plan-numbers:([a-z0-9-]+) -->(.*?)<!-- /plan-numbers:\1 -->",
                                 (REPO / page).read_text(), re.S):
            # a block written on both pages must read the same on both
            found[match[1]] = match[2] if found.get(match[1], match[2]) == match[2] else "<differs between pages>"
        for match in DOCTOR_SAMPLE_PATTERN.finditer((REPO / page).read_text()):
            found[DOCTOR_SAMPLE] = match[2]
    return found


def write_docs(blocks: dict[str, str]) -> None:
    for page in DOC_PAGES:
        path = REPO / page
        text = path.read_text()
        for name, body in blocks.items():
            text = marked(name).sub(lambda m: m[1] + body + m[3], text)
        path.write_text(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"save to {RESULTS.relative_to(REPO)}")
    parser.add_argument("--docs", action="store_true", help=f"rewrite the plan-numbers blocks of {', '.join(DOC_PAGES)}")
    args = parser.parse_args()
    if args.docs:
        write_docs(doc_blocks())
        return 0
    text = report()
    print(text)
    if args.write:
        RESULTS.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
