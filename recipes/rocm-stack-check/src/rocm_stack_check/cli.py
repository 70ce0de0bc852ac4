"""Command line: `rocm-stack-check check` and `rocm-stack-check bench`."""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

from . import REGRESSION_THRESHOLD, __version__, exit_codes
from .attention import BACKEND_NAMES, DTYPES, Shape

EXIT_CODES_HELP = (f"exit codes: {exit_codes.OK} all good (or no GPU, with --allow-no-gpu); "
                   f"{exit_codes.FAILED} Flash Attention not usable (check), a regression (bench --compare) or "
                   f"Flash not clearly faster than math (bench --quick --expect-speedup); "
                   f"{exit_codes.USAGE} bad arguments; {exit_codes.NO_GPU} no usable GPU, its cause named (check; bench "
                   f"without --device cpu or --quick)")


class Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line like every other error (the usage is a --help away). The commands'
    parsers are Parsers too (add_subparsers makes its own class)."""

    def error(self, message: str):
        commands = next((a for a in self._actions if isinstance(a, argparse._SubParsersAction)), None)
        if commands and message.endswith(f"required: {commands.dest}"):
            message = f"`{self.prog}` needs a command: {', '.join(commands.choices)}"
        self.exit(exit_codes.USAGE, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


DEVICE = re.compile(r"auto|cpu|cuda(?::\d+)?")


def device(text: str) -> str:
    """Where bench times: auto (the GPU), cpu, cuda or cuda:N, as PyTorch names a device."""
    if not DEVICE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a device: pass auto, cpu, cuda or cuda:N")
    return text


def shape(text: str) -> Shape:
    try:
        return Shape.parse(text)
    except ValueError:  # int() of a part, or not four positive parts
        raise argparse.ArgumentTypeError(f"{text!r} is not a shape: pass four whole numbers 1 or more, B,H,S,D, "
                                         "e.g. 1,16,4096,128") from None


def output_file(text: str) -> Path:
    """A file to write after the run: its folder must be there before the run starts, not after it."""
    path = Path(text).expanduser()
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a folder: pass a file name in it")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r}: folder {path.parent} does not exist: create it or pass another file")
    return path


def at_least(lowest: float, whole: bool = False, above: bool = False):
    """An argparse type: a number (whole, if `whole`) of `lowest` or more (more than `lowest`, if `above`).
    A count of 0 repetitions or a time limit of 0 ms would time nothing and report it as a result."""
    def check(text: str):
        try:
            value = int(text) if whole else float(text)
        except ValueError:
            value = None
        if value is None or not math.isfinite(value) or value < lowest or (above and value == lowest):
            bound = f"above {lowest:g}" if above else f"of {lowest:g} or more"
            raise argparse.ArgumentTypeError(f"{text!r} is not {'a whole number' if whole else 'a number'} {bound}")
        return value
    return check


def build_parser() -> argparse.ArgumentParser:
    from .bench import TimingSettings  # standard library only: torch is imported when a command runs

    bench_defaults = TimingSettings()
    parser = Parser(
        prog="rocm-stack-check", description="Does Flash Attention run on this GPU, and how fast is it?",
        epilog=EXIT_CODES_HELP)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    check = commands.add_parser("check", help="report the SDPA backends and run Flash Attention against math",
                                epilog=EXIT_CODES_HELP)
    check.add_argument("--json", action="store_true", help="print the report as JSON (status line on stderr)")
    check.add_argument("--output", type=output_file, help="also write the JSON report to this file")
    gpu = check.add_mutually_exclusive_group()
    gpu.add_argument("--allow-no-gpu", action="store_true",
                     help=f"exit {exit_codes.OK} when no GPU is usable, saying so: for recipe tests on build machines "
                          f"(without it, no usable GPU exits {exit_codes.NO_GPU} naming the cause and the fix)")
    gpu.add_argument("--require-gpu", action="store_true", help="the default; kept for scripts that pass it")
    check.add_argument("--require-flash-attn", action="store_true",
                       help="fail when the flash-attn package is not installed")
    check.add_argument("--expect-arch", metavar="GFX",
                       help="the architecture a package was built for (several: gfx942,gfx950): another GPU counts as none")

    bench = commands.add_parser("bench", help="time attention per backend and shape", epilog=EXIT_CODES_HELP)
    bench.add_argument("--quick", action="store_true",
                       help="the recipes' test benchmark: a few causal shapes up to S=4096, fp16 and bf16, forward "
                            "and backward, fused backends and math, under a minute; no GPU: says so, exits 0")
    bench.add_argument("--expect-speedup", action="store_true",
                       help=f"with --quick: exit {exit_codes.FAILED} when a backend the architecture table says works "
                            "here is not clearly faster than math at the largest shape")
    bench.add_argument("--expect-arch", metavar="GFX",
                       help="with --quick: the architecture a package was built for; another GPU counts as none")
    bench.add_argument("--log-json", action="store_true",
                       help="with --quick: also print the results as one JSON line for the build log")
    bench.add_argument("--shape", action="append", type=shape, metavar="B,H,S,D",
                       help="a shape to run (repeatable); replaces the default shapes")
    bench.add_argument("--dtype", action="append", choices=DTYPES, help="default: fp16 and bf16")
    bench.add_argument("--causal", choices=("both", "yes", "no"), default="both",
                       help="causal masking, plain, or both (default both)")
    bench.add_argument("--backend", action="append", metavar="NAME", choices=BACKEND_NAMES,
                       help=f"{', '.join(BACKEND_NAMES)} (repeatable; default: all there)")
    bench.add_argument("--forward-only", action="store_true", help="time the forward pass only, not the backward")
    bench.add_argument("--device", type=device, default="auto", help="auto (the GPU), cuda, cuda:N or cpu")
    bench.add_argument("--warmup", type=at_least(0, whole=True), default=3, help="untimed runs before timing (default 3)")
    bench.add_argument("--min-reps", type=at_least(1, whole=True), default=3, metavar="N",
                       help="timed repetitions at least (default 3)")
    bench.add_argument("--max-reps", type=at_least(1, whole=True), default=20, metavar="N",
                       help="timed repetitions at most (default 20)")
    bench.add_argument("--target-ms", type=at_least(0, above=True), default=200.0,
                       help="aim for this much timed work per measurement (default 200)")
    bench.add_argument("--batch-ms", type=at_least(0, above=True), default=bench_defaults.batch_ms,
                       help="queue enough calls per repetition, under one pair of device events, to keep the "
                            f"GPU busy this long, so launch cost stays hidden (default {bench_defaults.batch_ms:g})")
    bench.add_argument("--output", type=output_file, help="write the results as JSON")
    bench.add_argument("--plot", type=output_file, help="write a PNG plot of TFLOP/s (needs matplotlib)")
    bench.add_argument("--markdown", action="store_true", help="also print the table as markdown")
    bench.add_argument("--input", type=Path, help="read results from this JSON instead of running")
    bench.add_argument("--compare", type=Path, metavar="BASELINE.json",
                       help=f"print speed-ups over a baseline; exit {exit_codes.FAILED} on a regression")
    # REGRESSION_THRESHOLD says why 0.15; passes under 1 ms are bound by the host's launch rate and moved by up
    # to 2x between those runs.
    bench.add_argument("--threshold", type=at_least(0), default=REGRESSION_THRESHOLD,
                       help=f"a pass more than this fraction slower than the baseline regresses "
                            f"(default {REGRESSION_THRESHOLD:g})")
    bench.add_argument("--min-ms", type=at_least(0), default=1.0,
                       help="don't judge passes faster than this in the baseline: host-bound noise (default 1)")
    return parser


def run_quick_bench(arguments) -> int:
    from . import bench, quick

    if arguments.input:
        try:
            document = quick.judged_document(bench.load_document(arguments.input), arguments.expect_arch)
        except (OSError, ValueError) as error:
            print(f"rocm-stack-check bench: {error}", file=sys.stderr)
            return exit_codes.USAGE
        print(bench.format_table(document))
    else:
        from .environment import import_torch

        torch, torch_error = import_torch()
        if torch is None:
            print(f"rocm-stack-check bench: no GPU: PyTorch not importable ({torch_error}); quick benchmark skipped")
            return exit_codes.OK
        document = quick.run_quick(torch, arguments.expect_arch, progress=lambda line: print(line, flush=True))
        if isinstance(document, str):
            print(document)
            return exit_codes.OK
    print("\n".join(quick.format_verdict(document["speedup"])))
    if arguments.output:
        arguments.output.write_text(json.dumps(document, indent=2) + "\n")
        print(f"results written to {arguments.output}")
    if arguments.log_json:
        print(quick.log_line(document))
    failed = arguments.expect_speedup and not document["speedup"]["passed"]
    print(f"rocm-stack-check bench --quick: {quick.summary_line(document)}"
          + ("" if arguments.expect_speedup else " (not enforced: no --expect-speedup)"))
    return exit_codes.FAILED if failed else exit_codes.OK


def run_bench(arguments) -> int:
    from . import bench

    if arguments.quick:
        return run_quick_bench(arguments)
    quick_only = [name for name in ("expect_speedup", "expect_arch", "log_json") if getattr(arguments, name)]
    if quick_only:
        print(f"rocm-stack-check bench: --{quick_only[0].replace('_', '-')} goes with --quick: add --quick",
              file=sys.stderr)
        return exit_codes.USAGE
    if arguments.min_reps > arguments.max_reps:
        print(f"rocm-stack-check bench: --min-reps {arguments.min_reps} is more than --max-reps {arguments.max_reps}: "
              "pass a --min-reps no larger than --max-reps", file=sys.stderr)
        return exit_codes.USAGE

    try:
        baseline = bench.load_document(arguments.compare) if arguments.compare else None
        document = bench.load_document(arguments.input) if arguments.input else None
    except (OSError, ValueError) as error:  # read before a long run, so a wrong path fails at once
        print(f"rocm-stack-check bench: {error}", file=sys.stderr)
        return exit_codes.USAGE
    if document is not None:
        print(bench.format_table(document))
    else:
        from .environment import import_torch

        torch, torch_error = import_torch()
        if torch is None:
            print(f"rocm-stack-check bench: no GPU: PyTorch not importable ({torch_error})")
            return exit_codes.NO_GPU
        device = "cuda" if arguments.device == "auto" else arguments.device
        if device != "cpu" and not torch.cuda.is_available():
            from .environment import describe_platform
            from .usable import why_no_gpu

            print(f"rocm-stack-check bench: no GPU: {why_no_gpu(describe_platform(torch).to_dict())} "
                  "(or use --device cpu to time the CPU)")
            return exit_codes.NO_GPU
        if device.startswith("cuda:") and int(device[5:]) >= torch.cuda.device_count():
            print(f"rocm-stack-check bench: no {device}: PyTorch sees {torch.cuda.device_count()} GPU(s), "
                  "cuda:0 the first", file=sys.stderr)
            return exit_codes.USAGE
        settings = bench.TimingSettings(arguments.warmup, arguments.min_reps, arguments.max_reps, arguments.target_ms,
                                        arguments.batch_ms)
        causal_modes = {"both": (True, False), "yes": (True,), "no": (False,)}[arguments.causal]
        document = bench.run_benchmark(
            torch, device, arguments.shape or bench.DEFAULT_SHAPES, arguments.dtype or DTYPES, causal_modes,
            arguments.backend, settings, ("forward",) if arguments.forward_only else bench.PASSES,
            progress=lambda line: print(line, flush=True))
    if arguments.markdown:
        print(bench.format_markdown_table(document))
    if arguments.output:
        arguments.output.write_text(json.dumps(document, indent=2) + "\n")
        print(f"results written to {arguments.output}")
    if arguments.plot:
        from .plot import plot_available, write_plot

        available, why_not = plot_available()
        if available:
            write_plot(document, arguments.plot)
            print(f"plot written to {arguments.plot}")
        else:
            print(why_not)
    if arguments.compare:
        comparison = bench.compare_documents(document, baseline, arguments.threshold, arguments.min_ms)
        print("\n".join(comparison.lines))
        print(f"compared {comparison.compared} passes with {arguments.compare} ({comparison.judged} of "
              f"{arguments.min_ms} ms or more judged): {len(comparison.regressions)} regressed by more than "
              f"{arguments.threshold:.0%}")
        if comparison.regressions:
            return exit_codes.FAILED
    return exit_codes.OK


def main(argv: list[str] | None = None) -> int:
    arguments = build_parser().parse_args(argv)
    if arguments.command == "check":
        from .check import run_check

        return run_check(arguments.json, not arguments.allow_no_gpu, arguments.require_flash_attn,
                         arguments.expect_arch, arguments.output)
    return run_bench(arguments)


if __name__ == "__main__":
    sys.exit(main())
