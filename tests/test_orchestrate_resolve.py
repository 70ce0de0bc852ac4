"""Every requirement is resolved before anything is built (issue 14.2), one torch with our channel first
(issue 14.1/14.5), and a channel name is never taken for a folder (issue 13.4). Offline: channels are
folders, stand-in channels built here, or a closed port on 127.0.0.1."""
from __future__ import annotations

import asyncio
import json
import socket
import time
from pathlib import Path

import pytest
import rattler
from rattler_build import Stage0Recipe

from orchestrate import diagnose
from stack import virtual_packages_for

ARCH, ISA = "gfx1151", "11.5.1"
FIX_CHANNEL = "check the network or a proxy, or set source_channels to a mirror in orchestrate.toml"
MISSING = "nonexistent-pkg-xyz"


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def add_requirement(workspace: Path, recipe: str, section: str, spec: str) -> None:
    """`spec` joins the first `section:` list of tests/workspace/recipes/<recipe>/recipe.yaml."""
    path = workspace / "recipes" / recipe / "recipe.yaml"
    text = path.read_text()
    block, flow = f"  {section}:\n", f"  {section}: ["
    assert block in text or flow in text, f"{recipe} has no {section} list"
    edited = text.replace(block, f"{block}    - {spec}\n", 1) if block in text else text.replace(flow, f'{flow}"{spec}", ', 1)
    path.write_text(edited)


def use_channels(workspace: Path, *channels: str) -> None:
    listed = ", ".join(f'"{c}"' for c in channels)
    (workspace / "orchestrate.toml").write_text(f"source_channels = [{listed}]\n")


def lines_with(text: str, *words: str) -> list[str]:
    return [line for line in text.splitlines() if all(w in line for w in words)]


def summary_row(out: str, package: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith(f"{package} ")]


def test_a_run_requirement_already_in_the_channel_resolves(orchestrate, workspace):
    """A rebuild whose run requirement is up to date (so not in the plan's builds) and named nowhere else
    in its environments: found in the local channel, not reported missing."""
    add_requirement(workspace, "vllm", "run", "rocm-stack-check")
    assert orchestrate("build-all", "--arch", ARCH).code == 0
    recipe = workspace / "recipes/vllm/recipe.yaml"
    recipe.write_text(recipe.read_text() + "# a script change: vllm alone is rebuilt\n")
    result = orchestrate("build-all", "--arch", ARCH)
    assert result.code == 0, result.err


# --- a requirement that no channel has ------------------------------------------------------------------

def test_build_all_refuses_at_once_naming_the_requirement_and_package(orchestrate, workspace, channel):
    add_requirement(workspace, "vllm", "run", MISSING)
    started = time.monotonic()
    result = orchestrate("build-all", "--arch", ARCH)
    seconds = time.monotonic() - started
    assert result.code == 2, result.err
    assert seconds < 20, f"took {seconds:.0f}s"  # before any build: the test graph resolves in well under 1 s
    [line] = lines_with(result.err, MISSING, "vllm")
    assert f"{MISSING} (run requirement of vllm) is in none of the channels" in line
    assert "recipes/vllm/recipe.yaml" in line and "nothing was built" in line and "--keep-going" in line
    assert "Traceback" not in result.err and "building" not in result.out + result.err
    assert not channel.exists()


def test_keep_going_builds_the_rest_and_says_what_cannot_be_completed(orchestrate, workspace, channel):
    add_requirement(workspace, "vllm", "run", MISSING)
    result = orchestrate("build-all", "--arch", ARCH, "--keep-going", "-q")
    assert result.code == 1
    assert lines_with(result.err, "--keep-going", "vllm cannot be completed")
    [row] = summary_row(result.out, "vllm")
    assert "blocked" in row and MISSING in row
    assert "10 built" not in result.out and "9 built" in result.out
    names = {entry.name for entry in channel.manifest().values()}
    assert "vllm" not in names and {"pytorch", "aiter", "rocm-sdk"} <= names


def test_keep_going_blocks_what_needs_a_package_that_cannot_be_completed(orchestrate, workspace, channel):
    add_requirement(workspace, "pytorch-rocm", "host", MISSING)
    result = orchestrate("build-all", "--arch", ARCH, "--keep-going", "-q")
    assert result.code == 1
    [line] = lines_with(result.err, MISSING)
    assert f"{MISSING} (host requirement of pytorch)" in line
    for dependent in ("aiter", "vllm"):
        [row] = summary_row(result.out, dependent)
        assert "blocked" in row and "needs pytorch, whose requirements cannot be resolved" in row
    names = {entry.name for entry in channel.manifest().values()}
    assert names == {"rocm-sdk", "rocm-stack-check", "composable-kernel", "triton", "aotriton"}


def test_every_missing_requirement_is_named_once(orchestrate, workspace, channel):
    add_requirement(workspace, "vllm", "run", MISSING)
    add_requirement(workspace, "composable-kernel", "host", "another-missing-pkg >=1")
    add_requirement(workspace, "triton-rocm", "run", "rocm-sdk >=99")  # the plan's own rocm-sdk is 7.14.0
    result = orchestrate("build-all", "--arch", ARCH)
    assert result.code == 2
    assert len(lines_with(result.err, f"{MISSING} (run requirement of vllm)")) == 1
    assert len(lines_with(result.err, "another-missing-pkg >=1 (host requirement of composable-kernel)")) == 1
    [version] = lines_with(result.err, "rocm-sdk >=99 (run requirement of triton)")
    assert "matches none of the rocm-sdk packages" in version and "7.14.0" in version
    assert not channel.exists()


def test_fetch_reports_the_missing_requirement(orchestrate, workspace):
    add_requirement(workspace, "vllm", "run", MISSING)
    result = orchestrate("fetch", "--arch", ARCH, "--solve")  # plain fetch asks no channel (issue 32)
    assert result.code == 2
    assert lines_with(result.err, MISSING, "run requirement of vllm")
    assert "requirement(s) cannot be resolved" in result.err.splitlines()[-1]


# --- channels that cannot be reached ----------------------------------------------------------------------

def test_an_unreachable_channel_is_said_once_and_nothing_is_built(orchestrate, workspace, channel):
    dead = f"http://127.0.0.1:{closed_port()}/conda-forge"
    use_channels(workspace, dead)
    result = orchestrate("build-all", "--arch", ARCH)
    assert result.code == 2
    assert result.err.strip().splitlines() == [f"error: {dead} cannot be reached: {FIX_CHANNEL}"]
    assert not channel.exists()
    fetched = orchestrate("fetch", "--arch", ARCH, "--solve")
    assert fetched.code == 2 and len(lines_with(fetched.err, "cannot be reached")) == 1


@pytest.fixture
def conda_forge_unreachable(monkeypatch, tmp_path):
    """conda-forge (the bare name, as users and our defaults write it) behind a proxy on a closed port:
    unreachable whether or not this machine has a network; no cached repodata to fall back on."""
    proxy = f"http://127.0.0.1:{closed_port()}"
    for variable in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"):
        monkeypatch.setenv(variable, proxy)
    for variable in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("RATTLER_CACHE_DIR", str(tmp_path / "rattler-cache"))


def test_conda_forge_by_name_is_unreachable_not_missing(orchestrate, workspace, channel, conda_forge_unreachable):
    use_channels(workspace, "conda-forge")
    add_requirement(workspace, "composable-kernel", "host", "zlib")  # a package only conda-forge has
    result = orchestrate("build-all", "--arch", ARCH)
    assert result.code == 2
    assert result.err.strip().splitlines() == [f"error: conda-forge cannot be reached: {FIX_CHANNEL}"]
    assert not channel.exists()


def test_diagnose_asks_conda_forge_by_name_again(conda_forge_unreachable):
    """A build that failed to solve against `conda-forge` (as rattler-build's log lists it) is explained as
    an unreachable channel, never as "python is in none of the channels" (issue 13.4)."""
    log = ["  Platform: linux-64 [__unix=0=0, __glibc=2.36=0]", "  Channels:", "   - file:///gone/output/",
           "   - conda-forge", "  Specs:", "   - python >=3.10"]
    started = time.monotonic()
    line = diagnose.explain("Failed to resolve dependencies", log, "rocm-stack-check", ["conda-forge"])
    assert line == f"conda-forge cannot be reached: {FIX_CHANNEL}"
    assert time.monotonic() - started < 30


# --- one torch: our channel first, conda-forge second, strict channel priority ------------------------------

STAND_IN_RECIPES = {
    # conda-forge's convention: one name, the build told apart by its string (cpu_…, cuda…).
    "pytorch": {"package": {"name": "pytorch", "version": "2.99.0"},
                "build": {"string": "cpu_generic_py312_h0_0", "script": ["mkdir -p $PREFIX/share/cpu-torch"]}},
    "accelerate": {"package": {"name": "accelerate", "version": "1.10.0"},
                   "build": {"noarch": "generic", "script": ["mkdir -p $PREFIX/share/accelerate"]},
                   "requirements": {"run": ["pytorch >=2"]}},
    # conda-forge's vLLM and flash-attn are CUDA/CPU builds under the names ours now carry (newer than ours)
    "vllm": {"package": {"name": "vllm", "version": "0.99.0"},
             "build": {"string": "cuda129_py312_h0_0", "script": ["mkdir -p $PREFIX/share/cuda-vllm"]}},
    "flash-attn": {"package": {"name": "flash-attn", "version": "2.99.0"},
                   "build": {"string": "cpu_py312_h0_0", "script": ["mkdir -p $PREFIX/share/cpu-flash-attn"]}},
    # conda-forge packages that depend on each, by name only
    "needs-vllm": {"package": {"name": "needs-vllm", "version": "1.0"},
                   "build": {"noarch": "generic", "script": ["mkdir -p $PREFIX/share/needs-vllm"]},
                   "requirements": {"run": ["vllm >=0.1"]}},
    "needs-flash-attn": {"package": {"name": "needs-flash-attn", "version": "1.0"},
                         "build": {"noarch": "generic", "script": ["mkdir -p $PREFIX/share/needs-flash-attn"]},
                         "requirements": {"run": ["flash-attn >=2"]}},
}
# our packages under the names they carried before conda-forge's
OLD_NAMES = {"pytorch": "pytorch-rocm", "vllm": "vllm-rocm", "flash-attn": "flash-attn-rocm"}


@pytest.fixture
def stand_in_conda_forge(tmp_path) -> Path:
    """A local "conda-forge" with a CPU `pytorch` (a newer version than ours) and `accelerate`, which
    depends on `pytorch >=2` as conda-forge's does; built with py-rattler-build, no requirements, offline."""
    channel = tmp_path / "stand-in-conda-forge"
    for name, recipe in STAND_IN_RECIPES.items():
        folder = tmp_path / "stand-in-recipes" / name
        folder.mkdir(parents=True)
        path = folder / "recipe.yaml"
        path.write_text(json.dumps(recipe))
        Stage0Recipe.from_file(path).run_build(output_dir=channel)
    return channel


def solve(channels: list[Path], specs: list[str], priority=rattler.ChannelPriority.Strict):
    return asyncio.run(rattler.solve(
        sources=[rattler.Channel(str(c)) for c in channels], specs=specs, platforms=["linux-64", "noarch"],
        virtual_packages=virtual_packages_for(ISA), channel_priority=priority))


def torches(records, name: str = "pytorch") -> list[str]:
    return sorted(f"{r.name.normalized} {r.build}" for r in records if r.name.normalized.startswith(name))


def test_a_conda_forge_package_that_needs_pytorch_gets_ours(orchestrate, workspace, stand_in_conda_forge, tmp_path):
    """[vllm (ours), accelerate (conda-forge's, needs pytorch >=2)] with our channel first: one torch, ours.
    Also building the test graph shows the pre-solve lets a complete plan through (the __amdgpu_arch run
    constraints and pytorch's test environment, which needs rocm-stack-check, all resolve)."""
    assert orchestrate("build-all", "--arch", ARCH, "-q").code == 0
    ours = workspace / "channel"
    records = solve([ours, stand_in_conda_forge], ["vllm", "accelerate"])
    [torch] = [r for r in records if r.name.normalized == "pytorch"]
    assert str(torch.build).startswith(f"{ARCH}_") and str(torch.channel).rstrip("/").endswith("/channel")
    assert "accelerate" in {r.name.normalized for r in records}
    # conda-forge packages that need `vllm` and `flash-attn` get ours too, once each: no CUDA/CPU copy beside them
    wanted = ["accelerate", "needs-vllm", "needs-flash-attn"]
    records = solve([ours, stand_in_conda_forge], wanted)
    for name in ("pytorch", "vllm", "flash-attn"):
        [record] = [r for r in records if r.name.normalized == name]
        assert str(record.build).startswith(f"{ARCH}_") and str(record.channel).rstrip("/").endswith("/channel"), record
    assert {"needs-vllm", "needs-flash-attn"} <= {r.name.normalized for r in records}
    # Strict priority is what keeps it ours: without it conda-forge's newer CPU/CUDA builds win.
    loose = solve([ours, stand_in_conda_forge], ["vllm", "accelerate"], rattler.ChannelPriority.Disabled)
    assert torches(loose) == ["pytorch cpu_generic_py312_h0_0"]
    loose = solve([ours, stand_in_conda_forge], wanted, rattler.ChannelPriority.Disabled)
    assert torches(loose, "vllm") == ["vllm cuda129_py312_h0_0"] and torches(loose, "flash-attn") == ["flash-attn cpu_py312_h0_0"]

    # What issue 14 measured: our PyTorch named `pytorch-rocm` leaves the name `pytorch` to conda-forge,
    # and a package that depends on `pytorch` pulls a second torch into the environment; so did vllm-rocm and
    # flash-attn-rocm (issue 20) for packages that need `vllm` or `flash-attn`.
    renamed = tmp_path / "renamed-channel"
    for subdir in ("linux-64", "noarch"):
        repodata = json.loads((ours / subdir / "repodata.json").read_text())
        for records_of_kind in (repodata.get("packages", {}), repodata.get("packages.conda", {})):
            for record in records_of_kind.values():
                record["name"] = OLD_NAMES.get(record["name"], record["name"])
                record["depends"] = [(OLD_NAMES[d.split()[0]] + d[len(d.split()[0]):]) if d.split()[0] in OLD_NAMES else d
                                     for d in record.get("depends", [])]
        (renamed / subdir).mkdir(parents=True)
        (renamed / subdir / "repodata.json").write_text(json.dumps(repodata))
    two = solve([renamed, stand_in_conda_forge], ["vllm-rocm"] + wanted)
    assert torches(two) == ["pytorch cpu_generic_py312_h0_0", f"pytorch-rocm {torch.build}"]
    assert [r.split()[0] for r in torches(two, "vllm")] == ["vllm", "vllm-rocm"]
    assert [r.split()[0] for r in torches(two, "flash-attn")] == ["flash-attn"]  # the CPU one; ours was not asked for


def test_the_real_recipes_offline_name_conda_forge_before_anything_else(conda_forge_unreachable, tmp_path, capsys,
                                                                        monkeypatch):
    """Issue 13's measurement, on the real recipes with their defaults (conda-forge by name) and AMD's files
    not locked yet: with no network the one line names conda-forge, before AMD's index is even asked, and
    nothing is written."""
    from conftest import REPO
    from orchestrate.cli import main

    monkeypatch.delenv("ORCHESTRATE_ARCH", raising=False)
    lock = (REPO / "variants" / "prebuilt-lock.yaml").read_text()
    channel = tmp_path / "channel"
    code = main(["build-all", "--arch", ARCH, "--workspace", str(REPO), "--channel", str(channel), "-q"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.strip().splitlines() == [f"error: conda-forge cannot be reached: {FIX_CHANNEL}"]
    assert "locking AMD artifacts" not in captured.out
    assert (REPO / "variants" / "prebuilt-lock.yaml").read_text() == lock
    assert not list(channel.rglob("*.conda"))
