"""What the project's architecture table (variants/architectures.yaml) expects of this GPU.

The table has one home, the repository. The conda recipe converts it to `architectures.json` inside this
package at build time, so an installed tool needs neither the repository nor PyYAML. Run from a checkout
(pip/pixi editable install, or `python -m` from the source tree) the tool reads the YAML itself.
"""
from __future__ import annotations

import glob
import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

PACKAGED_TABLE = Path(__file__).with_name("architectures.json")
TABLE_IN_REPOSITORY = Path("variants") / "architectures.yaml"
TABLE_PATH_VARIABLE = "ROCM_STACK_ARCH_TABLE"  # explicit override, for a table outside both places
EXPERIMENTAL_AOTRITON_VARIABLE = "TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL"


@dataclass
class ArchitectureTable:
    architectures: dict  # arch name -> its entry, as in the YAML
    source: str  # "package" or the path read

    @classmethod
    def from_file(cls, path: Path, source: str) -> "ArchitectureTable":
        if path.suffix == ".json":
            document = json.loads(path.read_text())
        else:
            import yaml  # only from a checkout, where the project's own environment has PyYAML

            document = yaml.safe_load(path.read_text())
        return cls(architectures=document["architectures"], source=source)


def candidate_table_files() -> list[tuple[Path, str]]:
    candidates = [(PACKAGED_TABLE, "package")]
    if os.environ.get(TABLE_PATH_VARIABLE):
        candidates.append((Path(os.environ[TABLE_PATH_VARIABLE]), os.environ[TABLE_PATH_VARIABLE]))
    for start in (Path(__file__).resolve().parent, Path.cwd()):
        for folder in (start, *start.parents):
            candidates.append((folder / TABLE_IN_REPOSITORY, str(folder / TABLE_IN_REPOSITORY)))
    return candidates


def load_architecture_table() -> tuple[ArchitectureTable | None, str]:
    """The table and "", or None and why not (the check then reports what it saw without expectations)."""
    problems = []
    for path, source in candidate_table_files():
        if not path.is_file():
            continue
        try:
            return ArchitectureTable.from_file(path, source), ""
        except Exception as error:
            problems.append(f"{path}: {type(error).__name__}: {error}")
    return None, "; ".join(problems) or "architecture table not found (not packaged, no checkout found)"


@dataclass
class Expectations:
    arch: str
    known: bool
    product: str = ""
    aotriton: str = "no"  # yes | experimental | no
    aotriton_why: str = ""
    ck_sdpa: str = "no"
    aotriton_image_family: str = ""
    flash_attn_backends: list[str] = field(default_factory=list)
    required_environment: dict[str, str] = field(default_factory=dict)

    @property
    def flash_expected(self) -> bool:
        """Should PyTorch's Flash SDPA run here with the stack's builds?"""
        return self.aotriton != "no" or self.ck_sdpa != "no"

    def to_dict(self) -> dict:
        return {**asdict(self), "flash_expected": self.flash_expected}


def _capability(entry: dict, name: str) -> tuple[str, str]:
    capability = entry.get("capabilities", {}).get(name, {})
    return str(capability.get("value", "no")), capability.get("why", "")


def expectations_for(arch: str, table: ArchitectureTable) -> Expectations:
    entry = table.architectures.get(arch)
    if entry is None:
        return Expectations(arch=arch, known=False)
    aotriton, aotriton_why = _capability(entry, "aotriton")
    expected = Expectations(
        arch=arch,
        known=True,
        product=entry.get("product", ""),
        aotriton=aotriton,
        aotriton_why=aotriton_why,
        ck_sdpa=_capability(entry, "ck_sdpa")[0],
        aotriton_image_family=entry.get("aotriton_image_family", ""),
        flash_attn_backends=[
            backend
            for backend, capability in (("ck", "flash_attn_ck"), ("triton", "flash_attn_triton"))
            if _capability(entry, capability)[0] != "no"
        ],
    )
    if aotriton == "experimental":
        expected.required_environment[EXPERIMENTAL_AOTRITON_VARIABLE] = "1"
    return expected


@dataclass
class AotritonFiles:
    """Where libaotriton_v2 and this arch's kernel images were found (torch's lib dir, then the prefix)."""

    library: str | None = None
    images_dir: str | None = None
    image_count: int = 0
    searched: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.library is not None and self.image_count > 0

    def to_dict(self) -> dict:
        return {**asdict(self), "complete": self.complete}


def find_aotriton_files(torch_lib_dir: Path | None, image_family: str) -> AotritonFiles:
    found = AotritonFiles()
    lib_dirs = [d for d in (torch_lib_dir, Path(sys.prefix) / "lib") if d is not None]
    for lib_dir in lib_dirs:
        found.searched.append(str(lib_dir))
        if found.library is None:
            libraries = sorted(glob.glob(str(lib_dir / "libaotriton_v2.so*")))
            found.library = libraries[0] if libraries else None
        images = lib_dir / "aotriton.images" / f"amd-{image_family}"
        if image_family and found.images_dir is None and images.is_dir():
            found.images_dir = str(images)
            found.image_count = sum(1 for p in images.rglob("*") if p.is_file())
    return found
