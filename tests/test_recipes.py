"""The real recipes (recipes/): each renders for every architecture, skips exactly what the table says,
pins every source, and every patch is explained and referenced (tests/test_upstream_contract.py applies
them to checkouts)."""
from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

import pytest

from orchestrate import runner
from orchestrate.architectures import ArchitectureTable
from orchestrate.options import Options

REPO = Path(__file__).resolve().parent.parent
TABLE = ArchitectureTable.load(REPO / "variants")
ARCHS = TABLE.names()
RECIPE_DIRS = sorted(p.parent.name for p in (REPO / "recipes").glob("*/recipe.yaml"))


@lru_cache(maxsize=None)
def plan_for(arch: str, overrides: tuple = (), everything: bool = True) -> runner.Plan:
    """Every recipe's plan (`plan --all`); everything=False is the default build-all plan (rocm-stack's closure)."""
    options = Options(workspace=REPO, channel=Path("/nonexistent/orchestrate-test-channel"), arch=arch,
                      source_channels=[], variant_overrides=dict(overrides))
    return runner.make_plan(options, everything=everything)


def outputs(arch: str, name: str, overrides: tuple = ()):
    return [s for s in plan_for(arch, overrides).steps if s.output.name == name]


SOURCE = (("pytorch_from", "source"),)
PATHS = {"prebuilt": (), "source": SOURCE}
# recipe folders that serve one path only (pytorch_from)
SOURCE_ONLY = {"pytorch-rocm", "triton-rocm", "aotriton", "torchvision-rocm", "torchaudio-rocm"}
PREBUILT_ONLY = {"pytorch-prebuilt"}
SHARED_PINS = __import__("yaml").safe_load((REPO / "variants/shared.yaml").read_text())
SDK_MAJOR, SDK_MINOR = SHARED_PINS["rocm_sdk_version"][0].split(".")[:2]
ROCM_TAG = f"rocm{SDK_MAJOR}{SDK_MINOR}"  # rocm101 for ROCm 10.1.x


# the architectures AMD ships PyTorch wheels for at the pinned release; elsewhere the prebuilt path builds from source
PREBUILT_ARCHS = [a for a in ARCHS if TABLE.get(a).prebuilt_torch.value == "yes"]


def effective_path(arch: str, path: str) -> str:
    return path if arch in PREBUILT_ARCHS else "source"


def built(arch: str, name: str, overrides: tuple = ()):
    return [s for s in outputs(arch, name, overrides) if s.state == runner.BUILD]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("arch", ARCHS)
def test_every_recipe_renders_and_orders_for(arch, path):
    plan = plan_for(arch, PATHS[path])
    # where AMD ships no PyTorch (prebuilt_torch: no) the prebuilt path builds from source, with the why
    path = effective_path(arch, path)
    # a multi-output recipe whose outputs all skip renders none (rattler-build drops them)
    absent_ok = PREBUILT_ONLY if path == "source" else set()
    assert set(RECIPE_DIRS) - absent_ok <= {s.output.recipe_name for s in plan.steps}
    seen = set()
    for step in plan.steps:  # dependencies come first
        assert step.output.requires <= seen | {step.output.name}, step.output.name
        seen.add(step.output.name)
    for step in plan.steps:
        assert step.state in (runner.BUILD, runner.SKIP)
        if step.state == runner.SKIP:
            assert step.reasons and all(r.strip() for r in step.reasons)
        if step.output.recipe_name in (SOURCE_ONLY if path == "prebuilt" else PREBUILT_ONLY):
            assert step.state == runner.SKIP, f"{step.output.label} builds on the {path} path"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("arch", ARCHS)
def test_one_torch_named_like_conda_forge_with_rocm_and_arch_in_its_build_string(arch, path):
    """Issue 14.1: pytorch/torchvision/torchaudio/triton, built once each per path, ROCm named."""
    py = "py" + SHARED_PINS["python"][0].replace(".", "")
    per_arch = f"{ROCM_TAG}_{arch}_{py}_h"
    [torch] = built(arch, "pytorch", PATHS[path])
    [vision] = built(arch, "torchvision", PATHS[path])
    [audio] = built(arch, "torchaudio", PATHS[path])
    [triton] = built(arch, "triton", PATHS[path])
    path = effective_path(arch, path)
    assert torch.output.build_string.startswith(per_arch) and vision.output.build_string.startswith(per_arch)
    assert audio.output.build_string.startswith(per_arch if path == "source" else f"{ROCM_TAG}_{py}_h")
    assert triton.output.build_string.startswith(f"{ROCM_TAG}_{py}_h")
    assert torch.output.recipe_name == ("pytorch-prebuilt" if path == "prebuilt" else "pytorch-rocm")
    constraints = [str(c) for c in torch.output.rendered["requirements"]["run_constraints"]]
    assert {"pytorch-cpu <0.0a0", "pytorch-gpu <0.0a0"} <= set(constraints)
    # the old names are gone; pytorch-rocm is now only the selector, which the stack installs
    for old in ("pytorch-rocm", "triton-rocm", "torchvision-rocm", "torchaudio-rocm"):
        needing = {s.output.name for s in plan_for(arch, PATHS[path]).steps if old in s.output.requires}
        assert needing <= ({"rocm-stack"} if old == "pytorch-rocm" else set()), (old, needing)
    [selector] = built(arch, "pytorch-rocm", PATHS[path])
    assert selector.output.noarch and [str(r) for r in selector.output.rendered["requirements"]["run"]] == [
        f"pytorch {torch.output.version}.* *rocm*"]


def test_prebuilt_arch_neutral_packages_are_one_file_for_every_architecture():
    """pytorch-base (AMD's torch host wheel), triton and torchaudio: same name, build string and source."""
    for name in ("pytorch-base", "triton", "torchaudio"):
        a, b = built("gfx1151", name)[0].output, built("gfx942", name)[0].output
        assert (a.label, a.rendered.get("source")) == (b.label, b.rendered.get("source")), name
        assert "gpu_arch" not in a.variant, name


@pytest.mark.parametrize("arch", PREBUILT_ARCHS)
def test_prebuilt_pytorch_is_the_base_plus_this_architectures_device_kernels(arch):
    """As AMD splits it (torch[device-<gfx>]): pytorch requires the host package and the target's device package,
    which requires its SDK device package and, where AMD ships one, its family's (the table's torch_device_family)."""
    [torch] = built(arch, "pytorch")
    assert torch.output.rendered["requirements"]["run"] == [
        {"pin_subpackage": {"name": "pytorch-base", "exact": True}},
        {"pin_subpackage": {"name": f"amd-torch-device-{arch}", "exact": True}}]
    [device] = built(arch, f"amd-torch-device-{arch}")
    family = TABLE.get(arch).torch_device_family
    assert device.output.rendered["requirements"]["run"] == [
        {"pin_subpackage": {"name": "pytorch-base", "exact": True}},
        f"rocm-sdk-device-{arch} {SHARED_PINS['rocm_sdk_version'][0]}.*",
        *([{"pin_subpackage": {"name": f"amd-torch-device-{family}", "exact": True}}] if family else []),
        f"__glibc >={SHARED_PINS['c_stdlib_version'][0]}"]
    urls = [s["url"] for s in device.output.rendered["source"]]
    assert urls[0].endswith(f"/amd-torch-device-{arch}/") or f"amd_torch_device_{arch}-" in urls[0]
    assert [s.output.name for s in plan_for(arch).steps if s.output.name.startswith("amd-torch-device-")] == (
        [f"amd-torch-device-{family}"] if family else []) + [f"amd-torch-device-{arch}"]


def test_a_family_device_package_is_one_package_for_its_whole_family():
    """amd-torch-device-gfx115x is the same package (name, build string, input hash, source) whichever member
    plans it, so a channel holds it once; its files are in no target's package."""
    families: dict[str, list[str]] = {}
    for arch in PREBUILT_ARCHS:
        families.setdefault(TABLE.get(arch).torch_device_family, []).append(arch)
    families.pop("")
    assert set(families) == {"gfx110x", "gfx115x", "gfx12-0"}
    for family, members in families.items():
        packages = [built(arch, f"amd-torch-device-{family}")[0].output for arch in members]
        assert len({(p.build_string, p.input_hash, str(p.rendered["source"])) for p in packages}) == 1, family
        assert "gpu_arch" not in packages[0].variant
        for arch in members:
            [device] = built(arch, f"amd-torch-device-{arch}")
            assert "torch-device-family.whl" not in str(device.output.rendered["source"]), arch


def test_skips_follow_the_table():
    for arch in ARCHS:
        value = {name: cap.value for name, cap in TABLE.get(arch).capabilities.items()}
        [aotriton] = outputs(arch, "aotriton", SOURCE)
        assert (aotriton.state == runner.SKIP) == (value["aotriton"] == "no"), arch
        [aiter] = outputs(arch, "aiter")
        assert (aiter.state == runner.SKIP) == (value["aiter"] == "no")
        built_backends = sorted(s.output.variant["flash_attn_backend"] for s in outputs(arch, "flash-attn")
                                if s.state == runner.BUILD)
        assert built_backends == sorted(TABLE.get(arch).flash_attn_backends)
        for always in ("rocm-sdk", "pytorch", "rocm-stack"):
            assert built(arch, always) and built(arch, always, SOURCE), (arch, always)
        # vLLM's HIP_SUPPORTED_ARCHS and TheRock's CK exclusions: skipped with the table's why, never attempted
        for name, capability in (("vllm", "vllm"), ("composable-kernel", "composable_kernel")):
            [step] = outputs(arch, name)
            assert (step.state == runner.SKIP) == (value[capability] == "no"), (arch, name)
            if step.state == runner.SKIP:
                assert step.reasons == [f"{capability} no: {TABLE.get(arch).capabilities[capability].why}"]


def test_default_plan_is_what_rocm_stack_needs_and_says_why():
    steps = {s.output.name: s for s in plan_for("gfx1151", everything=False).steps}
    ck = steps["composable-kernel"]
    assert ck.state == runner.NOT_NEEDED
    assert ck.reasons == ["not needed by rocm-stack: build it with `orchestrate build composable-kernel`"]
    assert steps["rocm-stack"].state == runner.BUILD and "the default target" in steps["rocm-stack"].reasons
    needed = [s for s in steps.values() if s.state == runner.BUILD and s.output.name != "rocm-stack"]
    assert needed and all(any(r.startswith("rocm-stack needs it") for r in s.reasons) for s in needed)


@pytest.mark.parametrize("arch", ARCHS)
def test_the_default_build_has_flash_attn_with_the_tables_default_backend(arch):
    """build-all builds flash-attn where the architecture has a backend: Triton where it is supported (minutes),
    CK where it is the only one (gfx90a); rocm-stack requires it; the other backend is on request. doctor's
    support line says the same."""
    from orchestrate.doctor import support_check

    steps = [s for s in plan_for(arch, everything=False).steps if s.output.name == "flash-attn"]
    built_now = {s.output.variant["flash_attn_backend"]: s for s in steps if s.state == runner.BUILD}
    offered = TABLE.get(arch).flash_attn_backends
    expected = "triton" if "triton" in offered else "ck" if "ck" in offered else None
    assert list(built_now) == ([expected] if expected else [])
    [stack] = [s for s in plan_for(arch, everything=False).steps if s.output.name == "rocm-stack"]
    assert ("flash-attn" in stack.output.requires) == bool(expected)
    support = support_check(TABLE.get(arch)).detail
    if expected:
        assert f"default backend for {arch}: {expected}" in built_now[expected].reasons
        assert f"flash-attn {'Triton' if expected == 'triton' else 'CK'} (default)" in support
    for other in (s for s in steps if s.state == runner.NOT_NEEDED):
        backend = other.output.variant["flash_attn_backend"]
        assert other.reasons == [f"on request: build it with `orchestrate build flash-attn --variant "
                                 f"flash_attn_backend={backend}` (default backend for {arch}: {expected})"]
        assert f"flash-attn {'Triton' if backend == 'triton' else 'CK'} (on request)" in support


def test_flash_attn_on_request_and_a_backend_the_arch_lacks():
    steps = [s for s in plan_for("gfx1151", (("flash_attn_backend", "ck"),), everything=False).steps
             if s.output.name == "flash-attn"]
    assert [(s.output.variant["flash_attn_backend"], s.state) for s in steps] == [("ck", runner.BUILD)]
    assert "asked for with --variant flash_attn_backend=ck" in steps[0].reasons
    with pytest.raises(Exception, match="gfx90a has no flash-attn triton backend .*aiter.*: choose one of its backends: ck"):
        plan_for("gfx90a", (("flash_attn_backend", "triton"),), everything=False)


def test_pytorch_on_mi100_builds_without_aotriton_and_says_so():
    [pytorch] = built("gfx908", "pytorch", SOURCE)
    assert "aotriton" not in pytorch.output.requires
    assert any("without aotriton" in r for r in pytorch.reasons)


def test_mi100_flash_attention_is_an_opt_in():
    [default] = outputs("gfx908", "aotriton", SOURCE)
    assert default.state == runner.SKIP
    opt_in = SOURCE + (("aotriton_mi100_fa", "true"),)
    [opted] = outputs("gfx908", "aotriton", opt_in)
    assert opted.state == runner.BUILD
    assert any("gfx908" in p.name for p in opted.output.patches)
    [pytorch] = built("gfx908", "pytorch", opt_in)
    assert "aotriton" in pytorch.output.requires


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("arch", ARCHS)
def test_arch_specific_packages_say_their_arch_and_require_its_isa(arch, path):
    isa = TABLE.get(arch).isa
    for step in plan_for(arch, PATHS[path]).steps:
        o = step.output
        if "gpu_arch" not in o.variant or step.state == runner.SKIP:
            continue
        assert f"{arch}_" in o.build_string, o.label
        reqs = o.rendered.get("requirements") or {}
        constraints = (reqs.get("run_constraints") or []) + (reqs.get("run") or [])
        if o.name.endswith(f"-{arch}"):  # a target's device package: beside other targets' on a machine with several GPUs
            assert not [c for c in constraints if str(c).startswith("__amdgpu_arch")], o.label
            continue
        assert f"__amdgpu_arch =={isa}" in [str(c) for c in constraints], o.label


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("arch", ARCHS)
def test_the_stack_metapackage_requires_this_gpu(arch, path):
    [stack] = built(arch, "rocm-stack", PATHS[path])
    run = {str(r).split()[0]: str(r) for r in stack.output.rendered["requirements"]["run"]}
    assert run["__amdgpu_arch"] == f"__amdgpu_arch =={TABLE.get(arch).isa}"
    # every architecture-specific dependency is pinned to this architecture's builds, the version the path makes
    default_build = plan_for(arch, PATHS[path], everything=False).steps
    for name in ("pytorch", "torchvision", "torchaudio", "vllm", "flash-attn"):
        [pkg] = [s for s in default_build if s.output.name == name and s.state == runner.BUILD] or [None]
        if pkg is None and name == "flash-attn" and not TABLE.get(arch).flash_attn_default:
            continue
        if name == "vllm" and TABLE.get(arch).capabilities["vllm"].value == "no":
            assert pkg is None and "vllm" not in run  # the stack installs without it there
            continue
        assert run[name].startswith(f"{name} {pkg.output.version}.* "), run[name]
        pattern = run[name].split()[2]
        assert re.fullmatch(pattern.replace("*", ".*"), pkg.output.build_string), (run[name], pkg.output.label)
    assert f"rocm-sdk-device-{arch}" in run
    # conda-forge's names, with ROCm and the arch in the build string like pytorch's (flash-attn: and its backend)
    for name in ("vllm", "flash-attn"):
        for step in built(arch, name, PATHS[path]):
            backend = f"{step.output.variant['flash_attn_backend']}_" if name == "flash-attn" else ""
            assert step.output.build_string.startswith(f"{ROCM_TAG}_{arch}_{backend}py"), step.output.build_string
    assert ("flash-attn" in run) == bool(TABLE.get(arch).flash_attn_default)
    # the SDK's host part is one package for every GPU; this GPU's kernels come from its device package
    assert not any(r.split()[0] == "rocm-sdk" and arch in r for r in run.values())
    # rattler-build cannot solve an environment that needs __amdgpu: only tests that need none
    assert all(set(t) == {"package_contents"} for t in stack.output.rendered["tests"])


def _all_rendered():
    for arch in ARCHS:
        yield from (s.output for s in plan_for(arch).steps)
        yield from (s.output for s in plan_for(arch, SOURCE).steps)
    yield from (s.output for s in plan_for("gfx908", SOURCE + (("aotriton_mi100_fa", "true"),)).steps)




def test_every_source_is_pinned():
    for o in _all_rendered():
        for source in o.rendered.get("source", []) or []:
            if "url" in source:
                if _unlocked_lock_artifact(o, source):
                    continue  # the runner refuses it until `orchestrate pins --lock` records a sha256
                sha256 = str(source.get("sha256", ""))
                # py-rattler-build 0.73 renders `sha256: ""` as 64 zeros: that is no pin
                assert re.fullmatch(r"[0-9a-f]{64}", sha256) and set(sha256) != {"0"}, (o.label, source.get("url"))
            elif "git" in source:
                assert re.fullmatch(r"[0-9a-f]{40}", str(source.get("rev", ""))), (o.label, source.get("git"))
            else:
                assert "path" in source, (o.label, source)


# Git sources that fetch their submodules, with why. rattler-build fetches every submodule of a git source unless
# it says `submodules: false`: a download the recipe never names (recipe-review.md, hidden downloads), and for a
# tree the build copies whole (aiter's 3rdparty/ into aiter_meta/) files shipped in the package.
FETCHES_SUBMODULES = {
    # not read at the pins (triton-lang/triton is too large to fetch here): left to rattler-build's default
    "https://github.com/triton-lang/triton.git": "triton 675c5987's .gitmodules not read",
    "https://github.com/triton-lang/llvm-project.git": "llvm-project has no submodules",
}


def test_git_sources_fetch_no_submodules_unless_declared():
    for o in _all_rendered():
        for source in o.rendered.get("source", []) or []:
            if "git" in source and source["git"] not in FETCHES_SUBMODULES:
                assert source.get("submodules") is False, (o.label, source["git"])


def _unlocked_lock_artifact(output, source) -> bool:
    """A source whose url and sha256 are a lock key pair (KEY_url, KEY_sha256) with no sha256 locked yet."""
    return any(key.endswith("_url") and value == str(source["url"]) and output.variant.get(key[:-4] + "_sha256") == ""
               for key, value in output.variant.items())


def test_every_recipe_has_tests():
    for o in _all_rendered():
        assert o.rendered.get("tests"), f"{o.label} has no tests section"


PATCHES = sorted((REPO / "patches").rglob("*.patch"))


@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: str(p.relative_to(REPO / "patches")))
def test_patch_opens_with_its_header(patch):
    head = patch.read_text().split("\n--- ", 1)[0].split("\ndiff --git", 1)[0]
    for field in ("Why:", "Upstream:", "Applies to:"):
        assert re.search(rf"^\s*#?\s*{field}\s*\S", head, re.M), f"{patch.name}: header lacks {field}"


def test_no_orphan_patches():
    referenced = {p for o in _all_rendered() for p in o.patches}
    assert set(PATCHES) == referenced, f"not referenced: {sorted(map(str, set(PATCHES) - referenced))}"


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("package", ["pytorch", "flash-attn", "vllm"])
def test_gpu_checks_run_through_the_check_tool(package, path):
    for step in built("gfx1151", package, PATHS[path]):
        tests = str(step.output.rendered["tests"])
        assert "rocm-stack-check check --json --expect-arch ${{ gpu_arch }}" in tests  # rendered at test time
        assert "rocm-stack-check" in step.output.requires


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("package", ["pytorch", "flash-attn"])
def test_pytorch_and_flash_attn_tests_time_flash_against_math(package, path):
    steps = built("gfx1151", package, PATHS[path])
    assert steps, f"{package} is not built for gfx1151 ({path})"
    for step in steps:
        tests = str(step.output.rendered["tests"])
        assert "rocm-stack-check bench --quick --expect-speedup --expect-arch ${{ gpu_arch }} --log-json" in tests


@pytest.mark.parametrize("arch", ARCHS)
def test_every_package_declares_its_time_and_disk(arch):
    """`plan` can show a total and `build-all` can check free disk before the first hour is spent."""
    for step in plan_for(arch).steps:
        if step.state == runner.BUILD:
            assert step.estimate.basis == "declared by the recipe", step.output.name
            assert step.estimate.seconds > 0 and step.estimate.disk_bytes > 0, step.output.name
    total, unknown = runner.expected_total(plan_for(arch))
    # half an hour at least (RDNA1 and most of RDNA2: no vLLM, no flash-attn); every recipe: up to 14 h where
    # composable-kernel builds its MHA library (12 h by CK PR #2225's log, scaled)
    assert unknown == 0 and 1800 < total < 16 * 3600


@pytest.mark.parametrize("arch, path", [("gfx1030", "source"), ("gfx900", "prebuilt"), ("gfx1103", "prebuilt")])
def test_a_recipe_rendered_again_for_fetch_and_build_is_the_one_planned(arch, path, tmp_path):
    """fetch and build render an edited copy of each recipe (recipes.rerender): it must ask for what the plan showed.
    A boolean context value came back as the string "false" there, and PyTorch from source on a GPU without
    aotriton asked for aotriton (and rocm-stack for the prebuilt versions on the source path)."""
    from orchestrate.recipes import recipe_data, rerender

    plan = plan_for(arch, PATHS[path])
    for step in plan.steps:
        if step.state != runner.BUILD:
            continue
        again = rerender(step.output, plan.config, recipe_data(step.output), tmp_path / step.output.name).recipe.to_dict()
        assert again["requirements"] == step.output.rendered["requirements"], step.output.label
        assert again["build"].get("script") == step.output.rendered["build"].get("script"), step.output.label


@pytest.mark.parametrize("path", PATHS)
def test_one_file_name_is_one_input_hash_across_every_architecture(path):
    """A channel serving several GPUs (build-all --arch gfx942,gfx950 builds each in turn into it) holds one file
    per name: a package built for two GPUs under one file name must be the same package (one input hash), else
    the second GPU's build replaces the first's and each run rebuilds the other. pytorch-rocm (the noarch
    selector), AMD's torchaudio and xgrammar only run with the GPU's torch: they are one package for all."""
    hashes: dict[str, dict[str, list[str]]] = {}  # file name -> input hash -> architectures
    for arch in ARCHS:
        for step in plan_for(arch, PATHS[path]).steps:
            if step.state != runner.SKIP:
                hashes.setdefault(step.output.label, {}).setdefault(step.output.input_hash, []).append(arch)
    clashes = {label: [archs[0] for archs in by_hash.values()] for label, by_hash in hashes.items() if len(by_hash) > 1}
    assert not clashes, f"same file name, different input hash (first architecture of each): {clashes}"
    for name in ("pytorch-rocm", "xgrammar") + (("torchaudio",) if path == "prebuilt" else ()):
        steps = [s for arch in ARCHS for s in built(arch, name, PATHS[path])]  # one build per version and path
        assert len({s.output.input_hash for s in steps}) == len({s.output.label for s in steps}) < len(steps), name
