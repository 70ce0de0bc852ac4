"""The scripts a package runs by being installed, and whether the local recipe declares them.

rattler-build runs a package's link scripts (`bin/.<name>-post-link.sh`, `-pre-link.sh`, `-pre-unlink.sh`) in the
host environments of every build that installs it, and activation scripts (`etc/conda/activate.d/*`,
`deactivate.d/*`) run in every shell that activates an environment. A package taken from a cache channel stands
for a build of the local recipe, so it may hold only the scripts that recipe makes: a recipe declares a link script
by the conda-build file (`post-link.sh` in its folder) or by naming it, and an activation script by the script's
own file name (`rocm-sdk.sh`) written in one of its files. Anything else is a package that was changed after it was
built (attack a01 of issue 37), and is refused before it enters the local channel.
"""
from __future__ import annotations

import asyncio
import re
from pathlib import Path

LINK_SCRIPT = re.compile(r"^(?:bin|Scripts)/\.[^/]+-(pre-link|post-link|pre-unlink)\.(?:sh|bat)\Z")
ACTIVATION_SCRIPT = re.compile(r"^etc/conda/(?:activate|deactivate)\.d/([^/]+)\Z")
RECIPE_TEXT_LIMIT = 1 << 20  # bytes read of each recipe file (recipes are a few KB)


def scripts_in(package: Path) -> list[str]:
    """The payload paths of `package` that run when it is installed or activated: from the archive's own
    members and from info/paths.json (what the installer links), so neither can hide one."""
    from rattler.package_streaming import PackageArchive

    async def read() -> set[str]:
        archive = await PackageArchive.from_path(package)
        names = set(await archive.list_files("pkg"))
        try:
            names |= {str(p.relative_path) for p in (await archive.paths_json()).paths}
        except Exception:  # no paths.json: the archive's members are what is there
            pass
        return names

    try:
        names = asyncio.run(read())
    except Exception as exc:  # an archive that cannot be listed is refused whole
        return [f"(the archive cannot be listed: {' '.join(str(exc).split())[:80]})"]
    return sorted(n for n in names if LINK_SCRIPT.match(n) or ACTIVATION_SCRIPT.match(n))


def recipe_text(recipe_dir: Path) -> str:
    """Every text file of the recipe's folder (recipe.yaml, build.sh, activate.sh, …), and their names."""
    parts = []
    for path in sorted(recipe_dir.rglob("*")) if recipe_dir.is_dir() else []:
        if path.is_file() and not path.is_symlink():
            parts.append(path.name)
            try:
                with open(path, "rb") as file:
                    parts.append(file.read(RECIPE_TEXT_LIMIT).decode("utf-8", "replace"))
            except OSError:
                continue
    return "\n".join(parts)


def undeclared(scripts: list[str], recipe_dir: Path) -> list[str]:
    """The scripts of `scripts` the recipe in `recipe_dir` does not declare."""
    text = recipe_text(recipe_dir)
    refused = []
    for path in scripts:
        link, activation = LINK_SCRIPT.match(path), ACTIVATION_SCRIPT.match(path)
        declared = (link and link[1] in text) or (activation and activation[1] in text)
        if not declared:
            refused.append(path)
    return refused
