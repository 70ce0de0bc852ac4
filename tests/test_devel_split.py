"""The SDK's devel tree goes only where something compiles (issue 38): the rendered plan of the real recipes, for an
architecture with aiter (gfx942) and one without (gfx90a). A PyTorch user's environment (the `pytorch` package and
everything it requires) never reaches rocm-sdk-devel; every compiled recipe has it in requirements.host; aiter,
which JIT-compiles with hipcc in the user's process, what imports aiter, and composable-kernel (headers and CMake
config a user compiles against) have it in requirements.run."""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

from orchestrate import runner
from orchestrate.options import Options
from orchestrate.resolve import requirement_spec

REPO = Path(__file__).resolve().parent.parent
DEVEL = "rocm-sdk-devel"


@functools.lru_cache(maxsize=None)
def plan(arch: str) -> tuple:
    options = Options(workspace=REPO, channel=Path("/nonexistent/channel"), arch=arch, source_channels=[])
    return tuple(step.output for step in runner.make_plan(options).steps)


def names(output, kind: str) -> set[str]:
    return {requirement_spec(s).split()[0] for s in (output.rendered.get("requirements") or {}).get(kind) or []}


def closure(arch: str, start: str) -> set[str]:
    """Every package name an install of `start` reaches through the plan's run requirements (every build of a
    name counted: a solver may pick any)."""
    by_name: dict[str, list] = {}
    for output in plan(arch):
        by_name.setdefault(output.name, []).append(output)
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for output in by_name.get(name, []):
            todo += sorted(names(output, "run"))
    return seen


@pytest.mark.parametrize("arch", ["gfx942", "gfx90a"])
def test_a_pytorch_environment_holds_no_devel_tree(arch):
    reached = closure(arch, "pytorch")
    assert "rocm-sdk" in reached and f"rocm-sdk-device-{arch}" in reached
    assert DEVEL not in reached, sorted(reached)
    for name in ("torchvision", "torchaudio"):
        assert DEVEL not in closure(arch, name)


@pytest.mark.parametrize("arch", ["gfx942", "gfx90a"])
def test_every_compiled_recipe_takes_the_devel_tree_in_host_and_only_jit_users_at_run_time(arch):
    for output in plan(arch):
        host, run = names(output, "host"), names(output, "run")
        if f"rocm-sdk-device-{arch}" in host:  # it compiles for this GPU against the SDK
            assert DEVEL in host, output.name
        # aiter's JIT and what imports aiter; composable-kernel, a library every user compiles against
        compiles_at_run_time = "aiter" in run or output.name in ("aiter", "composable-kernel")
        assert (DEVEL in run) == compiles_at_run_time, (output.name, output.variant.get("flash_attn_backend"), sorted(run))


def test_aiter_and_what_imports_it_require_the_devel_tree():
    outputs = {(o.name, o.variant.get("flash_attn_backend")): o for o in plan("gfx942")}
    for key in (("aiter", None), ("flash-attn", "triton"), ("vllm", None)):
        assert DEVEL in names(outputs[key], "run"), key
    assert DEVEL not in names(outputs[("flash-attn", "ck")], "run")


def test_an_exact_pin_subpackage_in_host_is_solved_as_that_exact_build():
    """rocm-sdk takes the SDK's license files from its sibling output rocm-sdk-licenses with an exact
    pin_subpackage, which rattler-build puts into the variant as `version build`: the plan solves that build."""
    from orchestrate.resolve import variant_pinned
    variant = {"rocm-sdk-licenses": "10.1.0 h3c0ce56_0", "python": "3.12"}
    assert variant_pinned("rocm-sdk-licenses", variant) == "rocm-sdk-licenses ==10.1.0 h3c0ce56_0"
    assert variant_pinned("python", variant) == "python 3.12.*"
