"""Install from a channel the way pixi does (py-rattler's solver and installer), for the tests."""
from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import rattler
from rattler import VirtualPackage, VirtualPackageOverrides


def virtual_packages_for(isa: str | None):
    """This machine's virtual packages, with an AMD GPU of the given ISA (None: no GPU)."""
    saved = {k: os.environ.get(k) for k in ("CONDA_OVERRIDE_AMDGPU", "CONDA_OVERRIDE_AMDGPU_ARCH")}
    os.environ["CONDA_OVERRIDE_AMDGPU"] = "0" if isa else ""
    os.environ["CONDA_OVERRIDE_AMDGPU_ARCH"] = isa or ""
    try:
        return detected_virtual_packages()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def solve(channel: str | Path, specs: list[str], isa: str | None):
    return solve_with(channel, specs, virtual_packages_for(isa))


def detected_virtual_packages():
    """What pixi detects here, with whatever CONDA_OVERRIDE_* the environment holds now."""
    return [v.into_generic() for v in VirtualPackage.detect(VirtualPackageOverrides.from_env())]


def solve_with(channel: str | Path, specs: list[str], virtual_packages):
    return asyncio.run(rattler.solve(
        sources=[rattler.Channel(str(channel))], specs=specs, platforms=["linux-64", "noarch"],
        virtual_packages=virtual_packages,
    ))


def install(channel: str | Path, specs: list[str], isa: str | None, prefix: Path) -> dict[str, str]:
    """Solve and install into a fresh prefix; returns {package name: build string}."""
    records = solve(channel, specs, isa)
    asyncio.run(rattler.install(records, target_prefix=prefix))
    return {r.name.normalized: str(r.build) for r in records}


REPO = Path(__file__).resolve().parent.parent


def make_workspace(root: Path) -> Path:
    """A copy of the test graph workspace (tests/workspace) with the real architecture table and the
    variant files generated from it; builds nothing."""
    from orchestrate.architectures import ArchitectureTable, write_variant_files

    workspace = root / "ws"
    shutil.copytree(REPO / "tests" / "workspace", workspace, ignore=shutil.ignore_patterns("channel", ".orchestrate"))
    shutil.copy(REPO / "variants" / "architectures.yaml", workspace / "variants" / "architectures.yaml")
    write_variant_files(ArchitectureTable.load(workspace / "variants"), workspace / "variants")
    return workspace


def package_info(package: Path) -> tuple[dict, dict[str, bytes]]:
    """A built package's info/index.json and the files under info/licenses/ (path below it -> bytes)."""
    import json
    from rattler.package_streaming import PackageArchive

    async def read():
        archive = await PackageArchive.from_path(package)
        index = json.loads(await archive.read_file("info/index.json"))
        licenses = {name[len("info/licenses/"):]: await archive.read_file(name)
                    for name in await archive.list_files("info") if name.startswith("info/licenses/")}
        return index, licenses
    return asyncio.run(read())
