"""The METADATA of real wheels, for the test wheels that stand for them: PyPI's own files, read at test time through
the project's one reader of release files (orchestrate/release_files.py: the PEP 658 file where PyPI serves it, else
range requests on the wheel's zip directory, never the whole wheel) and cached by the file's sha256 under
~/.cache/rocm-stack-tests/metadata/ ($XDG_CACHE_HOME respected), so a second run reads nothing from the network.
Without PyPI and without the cache the test fails and says so (CI has PyPI); it never falls back to a METADATA of
our own.

AMD's wheels are not on PyPI. Each is built from the same source as a PyPI wheel and differs from it only where
AMD's build tools write something else, and each of those differences is taken from AMD's own source:
- the version: AMD's local part (+rocm10.1.0, triton's +git<commit>.rocm10.1.0);
- torch: TheRock's PYTORCH_EXTRA_INSTALL_REQUIREMENTS replaces the CUDA build's (`rocm[libraries]==<sdk>` and the
  triton it built, `install_requirements = [f"rocm[libraries]=={get_rocm_sdk_version()}"]` + triton_requirement in
  https://github.com/ROCm/TheRock/blob/d7f3e692eef36dd1a30e9d3b447d7efea293fb8b/external-builds/pytorch/build_prod_wheels.py);
- torchvision: `torch==<the torch it was built with>` (its setup.py pins the torch of the build);
- the kpack-split host wheels (torch, torchvision): the lines rocm_kpack's splitter inserts at the end of the
  header (`Requires-Dist: rocm-bootstrap`, then per target `Provides-Extra: device-<gfx>` and one
  `Requires-Dist: <prefix>-<bundle> == <version>; extra == "device-<gfx>"` per bundle of its packaging chain, then
  `device-all`): WheelSplitter._rewrite_host_metadata in
  https://github.com/ROCm/rocm-systems/blob/7d605fca43de8be3e8423ccfe60a9328d8b5698e/shared/kpack/python/rocm_kpack/wheel_splitter.py,
  whose output TheRock's own test shows for a real torch
  (https://github.com/ROCm/TheRock/blob/9553e58e49ee0fa9684eb399ab81a7f8b856975b/build_tools/packaging/tests/promote_keep_list_test.py,
  get_multi_arch_metadata_torch_archs_body). _rewrite_host_metadata is the same at rocm-systems 2d9bbf45, the
  newest stored version, whose generate_device_metadata the device wheels follow (tests/prebuilt_helpers.py
  device_metadata).
"""
from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrate import web
from orchestrate.release_files import ReadError, World


@dataclass(frozen=True)
class PyPIWheel:
    """One file of a PyPI release, pinned by the sha256 PyPI's JSON API gives for it."""

    project: str
    version: str
    file: str
    sha256: str


# sha256 from PyPI's JSON API (https://pypi.org/pypi/<project>/json), read 2026-11-27
TRITON = PyPIWheel("triton", "3.8.0", "triton-3.8.0-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl",
                   "e91ffa46d095b252248297292dd22bcbacd53a125a0c2eefbbbf74925a320bc3")
TORCH = PyPIWheel("torch", "2.14.0", "torch-2.14.0-cp312-cp312-manylinux_2_28_x86_64.whl",
                  "fecffb58f51fd643d213acd68da21cc3fc19bea05a3bc64b4ee55128f47a4963")
TORCHVISION = PyPIWheel("torchvision", "0.29.0", "torchvision-0.29.0-cp312-cp312-manylinux_2_28_x86_64.whl",
                        "0e631a2f8b24732672d35224d2574ff89a78d56bef5364ef6094a625fa5f1771")
TORCHAUDIO = PyPIWheel("torchaudio", "2.11.0", "torchaudio-2.11.0-cp312-cp312-manylinux_2_28_x86_64.whl",
                       "6503c0bdb29daf2e6281bb70ea2dfe2c3553b782b619eb5d73bdadd8a3f7cecf")
ROCM_BOOTSTRAP = PyPIWheel("rocm-bootstrap", "0.3.0", "rocm_bootstrap-0.3.0-py3-none-any.whl",
                           "62d0160ecdd86f7132dbab9aec257cb2c96327df2592b0633aa6bb56399cc095")
AMDSMI = PyPIWheel("amdsmi", "7.0.2", "amdsmi-7.0.2-py3-none-any.whl",
                   "db5aa757f8ed82dfd799c4d39e2828542678dc4e485b0ab7fabe5f398fec5652")

# The CUDA build's PYTORCH_EXTRA_INSTALL_REQUIREMENTS in PyPI's torch (and the triton it pins), which TheRock's
# build replaces with its own
CUDA_BUILD_REQUIREMENT = re.compile(r"^Requires-Dist: (cuda-|nvidia-|triton\b)")


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rocm-stack-tests" / "metadata"


def _cached(path: Path, data: bytes) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_bytes(data)
    os.replace(partial, path)
    return data


def _listed(world: World, wheel: PyPIWheel) -> dict:
    """PyPI's entry for the wheel, which must carry the sha256 the fixture pins."""
    listed = {f.get("filename"): f for f in world.files(wheel.project, wheel.version)}
    entry = listed.get(wheel.file) or {}
    if (entry.get("digests") or {}).get("sha256") != wheel.sha256:
        pytest.fail(f"PyPI lists {wheel.file} with sha256 {(entry.get('digests') or {}).get('sha256')}, not "
                    f"{wheel.sha256}: the fixture's pin in tests/real_metadata.py names another file")
    return entry


def _world() -> World:
    return World(pypi_url=web.DEFAULT_PYPI_URL, git_base="", raw_base=None, amd_index="", timeout=60)


def metadata(wheel: PyPIWheel) -> str:
    """The wheel's .dist-info/METADATA as PyPI serves it (cached by the wheel's sha256)."""
    cached = cache_dir() / f"{wheel.sha256}.METADATA"
    if cached.is_file():
        return cached.read_text(encoding="utf-8")
    world = _world()
    try:
        _listed(world, wheel)
        text = world.wheel_metadata(wheel.project, wheel.version, wheel.file).value
    except ReadError as exc:
        pytest.fail(f"cannot read the real METADATA of {wheel.file} from {web.DEFAULT_PYPI_URL} ({exc}): these tests "
                    f"need PyPI once, then read {cached}")
    return _cached(cached, text.encode("utf-8")).decode("utf-8")


def wheel_file(wheel: PyPIWheel) -> bytes:
    """The whole wheel as PyPI serves it, checked against its pinned sha256 and cached by it: for the small wheels
    whose files, not only METADATA, a test needs (amdsmi's bindings)."""
    cached = cache_dir().parent / "wheels" / wheel.file
    if cached.is_file() and hashlib.sha256(cached.read_bytes()).hexdigest() == wheel.sha256:
        return cached.read_bytes()
    try:
        data = web.get(_listed(_world(), wheel)["url"], timeout=120, accept="*/*").body
    except (ReadError, web.Unreachable, web.HTTPStatus) as exc:
        pytest.fail(f"cannot download {wheel.file} from {web.DEFAULT_PYPI_URL} ({exc}): these tests need PyPI once, "
                    f"then read {cached}")
    if hashlib.sha256(data).hexdigest() != wheel.sha256:
        pytest.fail(f"PyPI served {wheel.file} with another sha256 than the pinned {wheel.sha256}")
    return _cached(cached, data)


def _split(text: str) -> tuple[list[str], str]:
    """(header lines, the body after the blank line, with that line)."""
    head, blank, body = text.partition("\n\n")
    return head.splitlines(), blank + body


def _join(header: list[str], body: str) -> str:
    return "\n".join(header) + ("\n" + body if body else "\n")


def with_version(text: str, name: str, version: str, replace: dict[str, str] | None = None,
                 drop: re.Pattern | None = None, instead: list[str] = (), add: list[str] = ()) -> str:
    """A PyPI wheel's METADATA as AMD's build of the same source writes it: Name and Version set, Requires-Dist lines
    rewritten (`replace`: old line -> new), the lines `drop` matches replaced by `instead` (where the first was),
    and `add` at the end of the header (where the splitter inserts its lines)."""
    header, body = _split(text)
    out, dropped = [], False
    for line in header:
        if line.startswith("Name:"):
            line = f"Name: {name}"
        elif line.startswith("Version:"):
            line = f"Version: {version}"
        elif drop is not None and drop.match(line):
            out += [] if dropped else [f"Requires-Dist: {r}" for r in instead]
            dropped = True
            continue
        out.append((replace or {}).get(line, line))
    missing = [line for line in (replace or {}) if line not in header] + ([drop.pattern] if drop and not dropped else [])
    if missing:
        pytest.fail(f"the real METADATA of {name} has no line {missing[0]!r}: PyPI's file is not the one this fixture "
                    "was written for")
    return _join(out + list(add), body)


def splitter_lines(device_prefix: str, version: str, chains: dict[str, list[str]]) -> list[str]:
    """What WheelSplitter._rewrite_host_metadata inserts into a host wheel's METADATA for these targets, each with
    the device bundles of its packaging chain that the split produced (e.g. gfx1151: [gfx1151, gfx115x])."""
    lines = ["Requires-Dist: rocm-bootstrap"]
    every = set()
    for target in sorted(chains):
        lines.append(f"Provides-Extra: device-{target}")
        for bundle in chains[target]:
            every.add(f"{device_prefix}-{bundle}")
            lines.append(f'Requires-Dist: {device_prefix}-{bundle} == {version}; extra == "device-{target}"')
    lines.append("Provides-Extra: device-all")
    lines += [f'Requires-Dist: {name} == {version}; extra == "device-all"' for name in sorted(every)]
    return lines


def requires_dist(text: str) -> list[str]:
    return [line.split(":", 1)[1].strip() for line in _split(text)[0] if line.startswith("Requires-Dist:")]
