"""The architecture table (variants/architectures.yaml) and the variant files generated from it.

Every other module asks this one what an architecture supports; nothing else parses the table.
"""
from __future__ import annotations

import difflib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from . import detect
from .errors import UserError
from .options import ARCH_ENV
from .yaml_files import parse

TABLE_FILE = "architectures.yaml"
SHARED_VARIANTS_FILE = "shared.yaml"
GENERATED_HEADER = (
    "# Generated from architectures.yaml by `orchestrate variants --write`; do not edit by hand.\n"
    "# Merged over shared.yaml by the orchestrator, which adds the keys it computes from them (rocm_tag, the\n"
    "# effective pytorch_from, the prebuilt artifacts' *_url/*_sha256): build a recipe with\n"
    "# `orchestrate build RECIPE --arch {arch}`; `rattler-build -m shared.yaml -m {arch}.yaml` lacks those keys.\n"
)
# flash-attn's two backends are two capabilities in the table but one variant key for recipes, so
# that a flash-attn recipe renders once per backend the architecture has.
FLASH_ATTN_BACKEND_KEY = "flash_attn_backend"
FLASH_ATTN_BACKENDS = {"ck": "flash_attn_ck", "triton": "flash_attn_triton"}
# The backend the default build gives an architecture (recipes read it: rocm-stack requires flash-attn where
# it is not "none"; the other backend's build is down-prioritized); the table's `flash_attn_default` rule.
FLASH_ATTN_DEFAULT_KEY = "flash_attn_default_backend"
NO_BACKEND = "none"
# The solver's GPU detection (rattler, and so pixi) reads these. rattler (py-rattler 0.28) drops
# `__amdgpu_arch` unless `__amdgpu` is detected too, so where no GPU is seen (a container build, CI, a login
# node) the arch override alone gives nothing: `__amdgpu` must be forced on with "0" (its only version; ""
# forces it off).
GPU_OVERRIDE_ENV, ARCH_OVERRIDE_ENV = "CONDA_OVERRIDE_AMDGPU", "CONDA_OVERRIDE_AMDGPU_ARCH"
GPU_OVERRIDE_ON = "0"


def override_hint(isa: str) -> str:
    """The environment that makes the solver see an AMD GPU of this ISA version (11.5.1 for gfx1151), also
    where none is detected: what every hint prints, to put before `pixi install` or after `export`."""
    return f"{GPU_OVERRIDE_ENV}={GPU_OVERRIDE_ON} {ARCH_OVERRIDE_ENV}={isa}"


@dataclass(frozen=True)
class Capability:
    name: str
    value: str
    why: str = ""

    @property
    def variant_key(self) -> str:
        return f"{self.name}_support"


@dataclass(frozen=True)
class Architecture:
    name: str
    product: str
    isa: str
    torch_device_family: str  # AMD's PyTorch family device wheel for this GPU, "" where none
    aotriton_image_family: str
    capabilities: dict[str, Capability]
    opt_ins: dict[str, str] = field(default_factory=dict)  # flag -> why
    apu: bool = False  # integrated GPU: its memory is system RAM through GTT, capped by the kernel
    # Whether AMD's index publishes PyTorch and the ROCm device wheel for this architecture, and why we think so
    prebuilt_torch: Capability = Capability("prebuilt_torch", "yes", "not declared in the table: assumed yes")
    flash_attn_preference: tuple[str, ...] = ()  # the table's `flash_attn_default` rule, same for every arch

    @property
    def flash_attn_backends(self) -> list[str]:
        return [b for b, cap in FLASH_ATTN_BACKENDS.items() if self.capabilities[cap].value != "no"]

    @property
    def flash_attn_default(self) -> str:
        """The backend the default build gives this architecture; "" where it supports none."""
        return next((b for b in self.flash_attn_preference if self.capabilities[FLASH_ATTN_BACKENDS[b]].value == "yes"), "")

    def flash_attn_reason(self, backend: str, requested: str | None = None) -> tuple[bool, str]:
        """Whether the default build (`build-all`) builds flash-attn's `backend` here, and why: plan's rows and
        doctor's support line both say this. `requested`: a `--variant flash_attn_backend=` value."""
        if requested:
            return backend == requested, f"asked for with --variant {FLASH_ATTN_BACKEND_KEY}={requested}"
        default = self.flash_attn_default or NO_BACKEND
        return backend == default, f"default backend for {self.name}: {default}"

    def variant_keys(self) -> dict[str, list]:
        """The keys recipes see, each as a one-element variant list (a list for flash-attn)."""
        keys: dict[str, list] = {
            "gpu_arch": [self.name],
            "amdgpu_isa": [self.isa],
            "torch_device_family": [self.torch_device_family],
            "aotriton_image_family": [self.aotriton_image_family],
        }
        for cap in self.capabilities.values():
            if cap.name not in FLASH_ATTN_BACKENDS.values():
                keys[cap.variant_key] = [cap.value]
        keys[FLASH_ATTN_BACKEND_KEY] = self.flash_attn_backends or [NO_BACKEND]
        keys[FLASH_ATTN_DEFAULT_KEY] = [self.flash_attn_default or NO_BACKEND]
        for flag in sorted(self.opt_ins):
            keys[flag] = [False]
        return keys

    def sdpa_note(self) -> str:
        """What PyTorch's Flash/memory-efficient SDPA is on this GPU, from the aotriton row: plan's note."""
        aotriton = self.capabilities.get("aotriton")
        if aotriton is None or aotriton.value == "yes":
            return f"Flash attention (SDPA) on {self.name}: aotriton Flash and memory-efficient attention in PyTorch"
        if aotriton.value == "experimental":
            return (f"Flash attention (SDPA) on {self.name}: aotriton Flash, experimental (the environment sets "
                    f"TORCH_ROCM_AOTRITON_ENABLE_EXPERIMENTAL=1): {aotriton.why}")
        return (f"Flash attention (SDPA) on {self.name}: none, PyTorch runs its math attention (correct, slower): "
                f"{aotriton.why}")

    def missing_for_keys(self, keys: set[str]) -> list[str]:
        """'without X: why' for every capability this architecture lacks behind the given keys."""
        return [
            f"without {cap.name}: {cap.why}"
            for cap in self.capabilities.values()
            if cap.value == "no" and cap.why and self._key_of(cap) in keys
        ]

    def _key_of(self, cap: Capability) -> str:
        return FLASH_ATTN_BACKEND_KEY if cap.name in FLASH_ATTN_BACKENDS.values() else cap.variant_key

    def reasons_for_keys(self, keys: set[str]) -> list[str]:
        """The `why` of every unsupported capability behind the given variant keys."""
        reasons = []
        for cap in self.capabilities.values():
            if self._key_of(cap) in keys and cap.value != "yes" and cap.why:
                reasons.append(f"{cap.name} {cap.value}: {cap.why}")
        return reasons


@dataclass(frozen=True)
class ArchitectureTable:
    architectures: dict[str, Architecture]
    path: Path

    @classmethod
    def load(cls, variants_dir: Path) -> "ArchitectureTable":
        path = Path(variants_dir) / TABLE_FILE
        try:
            raw = parse(path.read_text())
        except FileNotFoundError:
            raise UserError(f"{path} is missing: the architecture table must exist in the variants folder")
        except yaml.YAMLError as exc:
            raise UserError(f"{path} is not valid YAML ({_yaml_where(exc)}): fix the table")
        try:
            opt_in = raw.get("opt_in") or {}
            preference = tuple(str(b) for b in raw.get("flash_attn_default") or ())
            unknown = [b for b in preference if b not in FLASH_ATTN_BACKENDS]
            if unknown:
                raise UserError(f"{path}: flash_attn_default names {', '.join(unknown)}: use backends of "
                                f"{', '.join(FLASH_ATTN_BACKENDS)}")
            archs = {}
            for name, row in raw["architectures"].items():
                caps = {
                    cap: Capability(cap, str(spec["value"]), spec.get("why", ""))
                    for cap, spec in row["capabilities"].items()
                }
                flags = {flag: spec["why"] for flag, spec in opt_in.items() if name in spec["architectures"]}
                archs[name] = Architecture(
                    name=name,
                    product=row["product"],
                    isa=str(row["isa"]),
                    torch_device_family=str(row.get("torch_device_family") or ""),
                    aotriton_image_family=row.get("aotriton_image_family", ""),
                    capabilities=caps,
                    opt_ins=flags,
                    apu=bool(row.get("apu", False)),
                    flash_attn_preference=preference,
                    **({"prebuilt_torch": Capability("prebuilt_torch", str(row["prebuilt_torch"]["value"]),
                                                     row["prebuilt_torch"].get("why", ""))}
                       if "prebuilt_torch" in row else {}),
                )
        except (KeyError, TypeError, AttributeError) as exc:
            raise UserError(f"{path}: malformed architecture table ({exc!r}); compare with an existing row")
        for arch in archs.values():
            if arch.prebuilt_torch.value not in ("yes", "no") or (arch.prebuilt_torch.value == "no" and not arch.prebuilt_torch.why):
                raise UserError(f"{path}: {arch.name}: prebuilt_torch is {{value: yes|no, why: ...}} (a `no` needs its why "
                                "and source): fix the row")
        return cls(archs, path)

    def get(self, name: str) -> Architecture:
        try:
            return self.architectures[name]
        except KeyError:
            raise UserError(
                f"unknown architecture '{name}'{self._guess(name)}: choose one of {', '.join(self.names())}"
            ) from None

    def _guess(self, name: str) -> str:
        """" (did you mean …?)": the name in lower case (GFX1151), the family a prefix names (gfx11, gfx94), else
        a transposition of a name, else the nearest name."""
        written = name.strip().lower()
        if written in self.architectures:
            return f" (did you mean {written}?)"
        family = [n for n in self.names() if n.startswith(written)] if re.fullmatch(r"gfx\d+", written) else []
        if family:
            return f" ({written} is a family: did you mean {', '.join(family[:-1]) + ' or ' if family[:-1] else ''}{family[-1]}?)"
        # a transposition (gfx1115 for gfx1151) first: among 26 names difflib's nearest can be another GPU
        swapped = [n for n in self.names() if sorted(n) == sorted(written)]
        nearest = swapped[:1] or difflib.get_close_matches(written, self.names(), n=1, cutoff=0.6)
        return f" (did you mean {nearest[0]}?)" if nearest else ""

    def names(self) -> list[str]:
        return list(self.architectures)

    def by_isa(self, isa: str) -> Architecture | None:
        return next((a for a in self.architectures.values() if a.isa == isa), None)


def render_variant_file(arch: Architecture) -> str:
    # libyaml's dumper where there is one: the same text, and `plan` compares every variant file with it
    body = yaml.dump(arch.variant_keys(), Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper), sort_keys=False,
                     default_flow_style=None)
    return GENERATED_HEADER.format(arch=arch.name) + body


def variant_file_path(variants_dir: Path, arch: str) -> Path:
    return Path(variants_dir) / f"{arch}.yaml"


def stale_variant_files(table: ArchitectureTable, variants_dir: Path) -> list[Path]:
    """Variant files that are missing or differ from what the table generates."""
    stale = []
    for arch in table.architectures.values():
        path = variant_file_path(variants_dir, arch.name)
        if not path.exists() or path.read_text() != render_variant_file(arch):
            stale.append(path)
    return stale


def write_variant_files(table: ArchitectureTable, variants_dir: Path) -> list[Path]:
    written = []
    for arch in table.architectures.values():
        path = variant_file_path(variants_dir, arch.name)
        text = render_variant_file(arch)
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
            written.append(path)
    return written


def _yaml_where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark else str(exc)


SUPPORT_COLUMNS = [("aotriton", "Flash/mem-eff SDPA (aotriton)"), ("ck_mha", "CK attention lib"),
                   ("flash_attn_ck", "flash-attn CK"), ("flash_attn_triton", "flash-attn Triton"),
                   ("aiter", "aiter"), ("ck_sdpa", "PyTorch CK SDPA"), ("fbgemm_genai", "FBGEMM GenAI"), ("vllm", "vLLM")]
SUPPORT_MARKS = {"yes": "yes", "experimental": "experimental", "no": "—"}
# rocm_bootstrap's sub-families (ISA major.minor, the middle of its packaging_chain), as README's summary names them
SERIES = {"9.0": "GCN5 / CDNA1-2 (Vega, MI25-MI250)", "9.4": "CDNA3 (MI300)", "9.5": "CDNA4 (MI350)",
          "10.1": "RDNA1 (RX 5000)", "10.3": "RDNA2 (RX 6000, 680M)", "11.0": "RDNA3 (RX 7000, 780M)",
          "11.5": "RDNA3.5 (Ryzen AI APUs)", "12.0": "RDNA4 (RX 9000)"}


def _prebuilt_mark(arch: Architecture) -> str:
    return "AMD" if arch.prebuilt_torch.value == "yes" else "source"


def support_table_markdown(table: ArchitectureTable) -> str:
    """The full per-architecture table in docs/index.md, generated from the one table (a test keeps it in step)."""
    lines = ["| arch | GPU | PyTorch | family package | " + " | ".join(title for _, title in SUPPORT_COLUMNS) + " |",
             "|---|---|---|---|" + "---|" * len(SUPPORT_COLUMNS)]
    for arch in table.architectures.values():
        cells = [SUPPORT_MARKS[arch.capabilities[cap].value] if cap in arch.capabilities else "—"
                 for cap, _ in SUPPORT_COLUMNS]
        if arch.opt_ins and cells[0] == "—":
            cells[0] = "— (opt-in: " + ", ".join(f"`{f}`" for f in arch.opt_ins) + ")"
        family = f"`{arch.torch_device_family}`" if arch.torch_device_family else "—"
        lines.append(f"| {arch.name} | {arch.product} | {_prebuilt_mark(arch)} | {family} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _series_of(arch: Architecture) -> str:
    return ".".join(arch.isa.split(".")[:2])


def _summary_cell(members: list[Architecture], mark_of) -> str:
    """One cell of README's summary: the mark the whole series shares, else each mark with the targets that have it."""
    marks: dict[str, list[str]] = {}
    for arch in members:
        marks.setdefault(mark_of(arch), []).append(arch.name.removeprefix("gfx"))
    if len(marks) == 1:
        return next(iter(marks))
    return "; ".join(f"{mark} ({', '.join(names)})" for mark, names in marks.items())


def support_summary_markdown(table: ArchitectureTable) -> str:
    """README's summary of the table: one row per GPU series (rocm_bootstrap sub-family), each cell what its
    targets share or, where they differ, which target has what (a test keeps README in step)."""
    columns = [("aotriton", "Flash SDPA (aotriton)"), ("flash_attn", "flash-attn"), ("aiter", "aiter"),
               ("vllm", "vLLM")]
    series: dict[str, list[Architecture]] = {}
    for arch in table.architectures.values():
        series.setdefault(_series_of(arch), []).append(arch)

    def mark(cap: str):
        def of(arch: Architecture) -> str:
            if cap == "flash_attn":
                return ", ".join(b.upper() if b == "ck" else b.capitalize() for b in arch.flash_attn_backends) or "—"
            value = arch.capabilities[cap].value if cap in arch.capabilities else "no"
            return SUPPORT_MARKS[value]
        return of

    lines = ["| series | targets | PyTorch | " + " | ".join(title for _, title in columns) + " |",
             "|---|---|---|" + "---|" * len(columns)]
    for key, members in series.items():
        targets = ", ".join(a.name for a in members)
        cells = [_summary_cell(members, _prebuilt_mark)] + [_summary_cell(members, mark(cap)) for cap, _ in columns]
        lines.append(f"| {SERIES.get(key, 'gfx ' + key)} | {targets} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


# The pages that carry a generated copy of the table, by marker block: the manual every target, README a summary
SUPPORT_BLOCKS = {"docs/index.md": ("support-table", support_table_markdown),
                  "README.md": ("support-summary", support_summary_markdown)}


def support_pages(table: ArchitectureTable, workspace: Path, write: bool = False) -> list[Path]:
    """The pages whose generated table block differs from the table (rewritten in place with `write`); a page
    without the block, or missing, is none of them (a workspace of recipes only)."""
    stale = []
    for page, (block, render) in SUPPORT_BLOCKS.items():
        path = Path(workspace) / page
        start, end = f"<!-- {block}:start -->\n", f"\n<!-- {block}:end -->"
        text = path.read_text() if path.is_file() else ""
        if start not in text or end not in text:
            continue
        head, rest = text.split(start, 1)
        body, tail = rest.split(end, 1)
        if body != render(table):
            stale.append(path)
            if write:
                path.write_text(head + start + render(table) + end + tail)
    return stale


def choose_arch(explicit: str | None, table: ArchitectureTable, given_by: str = "") -> str:
    """The architecture a build is for: `explicit` (--arch, else orchestrate.toml's arch: options_from_args), else
    $ORCHESTRATE_ARCH, else this machine's GPU; one the table knows.
    An unknown one is named where it is written (`given_by`: options.arch_given_by)."""
    name = explicit or os.environ.get(ARCH_ENV) or detect.detect_gpu_arch()
    if not name:
        raise UserError(
            f"no AMD GPU found and no architecture given: pass --arch or set {ARCH_ENV} "
            f"to one of {', '.join(table.names())}"
        )
    try:
        return table.get(name).name
    except UserError as exc:
        raise UserError(f"{given_by}: {exc}" if given_by else str(exc)) from None
