"""Discover recipes and render them for one architecture with py-rattler-build.

The result is one `Output` per package variant the architecture gets: its name, version, build string,
what it requires, whether it is skipped (and why, from the architecture table), and the input hash that
decides whether it must be built.
"""
from __future__ import annotations

import copy
import difflib
import json
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import yaml
from rattler_build import RenderedVariant, Stage0Recipe, VariantConfig

from .architectures import (FLASH_ATTN_BACKEND_KEY, FLASH_ATTN_BACKENDS, SHARED_VARIANTS_FILE, Architecture, ArchitectureTable,
                            stale_variant_files, variant_file_path)
from . import pypi_table, yaml_files
from .errors import UserError
from .input_hash import SHARED_SCRIPTS, digest, file_digest, own_digests, recipe_folder_digest
from .options import Options
from .prebuilt import MI100_FA_FLAG, PYTORCH_FROM, Prebuilt, PytorchChoice, choose_pytorch_from

RECIPE_FILE = "recipe.yaml"
REQUIREMENT_SECTIONS = ("build", "host", "run")
PLATFORM_FLAGS = {"linux": True, "unix": True, "win": False, "osx": False, "linux64": True, "x86_64": True}


@dataclass
class Output:
    """One package (one variant of one recipe output) for the chosen architecture."""

    name: str
    version: str
    build_string: str
    recipe_name: str
    recipe_path: Path
    variant: dict[str, str]
    rendered: dict[str, Any]
    rendered_variant: RenderedVariant | None
    stage0: dict = field(default_factory=dict)  # the recipe as written (or, for PyPI packages, as filled in)
    requires: set[str] = field(default_factory=set)  # package names, from build/host/run/test requirements
    noarch: bool = False
    skip_reasons: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. "without aotriton: ..."
    patches: list[Path] = field(default_factory=list)
    own_digests: dict[str, str] = field(default_factory=dict)  # recipe/files/patches/variant
    input_hash: str = ""
    dependency_hashes: dict[str, str] = field(default_factory=dict)
    config: VariantConfig | None = None  # the config it builds with where not its plan's (a set's member packages)

    @property
    def skipped(self) -> bool:
        return bool(self.skip_reasons)

    @property
    def key(self) -> str:
        """Identifies the slot this package fills in a channel, across rebuilds."""
        return slot_key(self.name, self.variant)

    @property
    def pinned_in(self) -> str:
        """Where a user fixes this package's source pins."""
        if self.recipe_name == pypi_table.RECIPE_FOLDER:
            return f"variants/{pypi_table.TABLE_FILE} ({self.name}; `orchestrate pypi add`)"
        return f"recipes/{self.recipe_name}/recipe.yaml"

    @property
    def label(self) -> str:
        return f"{self.name}-{self.version}-{self.build_string}"

    @property
    def source_name(self) -> str:
        """Whose sources these are, as a user names them: the recipe's folder, or the package for a PyPI repack
        (every one of which is rendered from recipes/pypi)."""
        return self.name if self.recipe_name == pypi_table.RECIPE_FOLDER else self.recipe_name


def slot_key(name: str, variant: dict[str, str]) -> str:
    return name + "|" + json.dumps({k: str(v) for k, v in sorted(variant.items())}, sort_keys=True)


def discover(recipes_dir: Path) -> list[Path]:
    if not recipes_dir.is_dir():
        raise UserError(f"{recipes_dir} does not exist: the workspace needs a recipes/ folder")
    return sorted(p for p in recipes_dir.glob(f"*/{RECIPE_FILE}") if p.parent.name != SHARED_SCRIPTS)


@dataclass
class VariantChoice:
    """The variant config an architecture renders with, and what the orchestrator decided in it."""

    config: VariantConfig
    pytorch: PytorchChoice | None  # None where the recipes have no `pytorch_from` key
    prebuilt: Prebuilt | None  # None where the workspace declares no prebuilt artifacts
    values: dict[str, Any]


def variant_config(options: Options, table: ArchitectureTable, arch: Architecture) -> VariantConfig:
    return variant_choice(options, table, arch).config


def variant_choice(options: Options, table: ArchitectureTable, arch: Architecture) -> VariantChoice:
    """shared.yaml + <arch>.yaml + --variant, then what the orchestrator merges over them: the effective
    `pytorch_from` and the prebuilt artifacts' `KEY_url` / `KEY_sha256` for this architecture."""
    config = _declared_config(options, table, arch)
    defaults = config.to_dict()
    if options.variant_overrides:
        override_yaml = "\n".join(f"{k}: [{json.dumps(_typed(v))}]" for k, v in options.variant_overrides.items())
        config = config.merge(VariantConfig.from_yaml(override_yaml))
    # after the overrides, so `--variant rocm_sdk_version=...` moves the derived keys too
    config = config.merge(VariantConfig.from_yaml(_dump_variant_keys(derived_variant_keys(config.to_dict()))))
    values = config.to_dict()
    prebuilt = Prebuilt.load(options.variants_dir)
    decided: dict[str, Any] = {}
    pytorch = None
    if PYTORCH_FROM in values:
        pytorch = choose_pytorch_from(arch, str(_first_value(defaults[PYTORCH_FROM])), options.variant_overrides.get(PYTORCH_FROM),
                                      _typed(str(_first_value(values.get(MI100_FA_FLAG, False)))) is True, prebuilt, values)
        decided[PYTORCH_FROM] = pytorch.value
    if prebuilt is not None:
        decided.update(prebuilt.variant_keys(values, arch.name))
    if decided:
        config = config.merge(VariantConfig.from_yaml("\n".join(f"{k}: [{json.dumps(v)}]" for k, v in decided.items())))
    return VariantChoice(config, pytorch, prebuilt, config.to_dict())


def _first_value(value: Any) -> Any:
    return value[0] if isinstance(value, list) and value else value


def _declared_config(options: Options, table: ArchitectureTable, arch: Architecture) -> VariantConfig:
    stale = stale_variant_files(table, options.variants_dir)
    if stale:
        raise UserError(
            f"{', '.join(str(p) for p in stale)} out of date with {table.path.name}: run `orchestrate variants --write`"
        )
    files = [options.variants_dir / SHARED_VARIANTS_FILE, variant_file_path(options.variants_dir, arch.name)]
    try:
        config = VariantConfig.from_files([str(f) for f in files if f.exists()])
    except Exception as exc:  # py-rattler-build raises its own error types
        raise UserError(f"variant files for {arch.name} cannot be read ({_one_line(exc)}): fix {files[0].parent}")
    if options.variant_overrides:
        known = set(config.keys())
        for key in options.variant_overrides:
            if key in _opt_in_flags(table) and key not in arch.opt_ins:
                offered = [a.name for a in table.architectures.values() if key in a.opt_ins]
                raise UserError(f"--variant {key} is not offered for {arch.name}: it applies to {', '.join(offered)} only")
            if key not in known:
                near = difflib.get_close_matches(key.replace("-", "_").lower(), sorted(known), n=1)
                raise UserError(f"unknown variant key '{key}' for {arch.name}: " + (
                    f"did you mean {near[0]}? (--variant {near[0]}={options.variant_overrides[key]})" if near
                    else f"known keys are {', '.join(sorted(known))}"))
        backend = options.variant_overrides.get(FLASH_ATTN_BACKEND_KEY)
        if backend is not None and backend not in arch.flash_attn_backends:
            cap = arch.capabilities.get(FLASH_ATTN_BACKENDS.get(backend, ""))
            fix = (f"choose one of its backends: {', '.join(arch.flash_attn_backends)}" if arch.flash_attn_backends
                   else "drop the option: flash-attn is not built for it")
            raise UserError(f"--variant {FLASH_ATTN_BACKEND_KEY}={backend}: {arch.name} has no flash-attn {backend} backend"
                            + (f" ({cap.why})" if cap and cap.why else "") + f": {fix}")
    return config


def derived_variant_keys(values: dict) -> dict[str, str]:
    """Variant keys computed from the pinned ones, so each fact has one place: `rocm_tag` ("rocm101" for
    ROCm 10.1.x), which build strings use to name the ROCm release a package was built for."""
    [sdk] = values.get("rocm_sdk_version") or ["0.0"]
    major, minor = str(sdk).split(".")[:2]
    return {"rocm_tag": f"rocm{major}{minor}"}


def _dump_variant_keys(keys: dict[str, str]) -> str:
    return "\n".join(f"{k}: [{json.dumps(v)}]" for k, v in keys.items())


def render_all(options: Options, config: VariantConfig, arch: Architecture) -> list[Output]:
    typed_values = config.to_dict()
    outputs: list[Output] = []
    for recipe_path in discover(options.recipes_dir):
        if recipe_path.parent.name == pypi_table.RECIPE_FOLDER:  # one recipe, rendered once per table entry
            shared_path = options.variants_dir / SHARED_VARIANTS_FILE
            shared = (yaml_files.parse(shared_path.read_text()) or {}) if shared_path.is_file() else {}
            table = pypi_table.load_table(options.variants_dir, shared)
            stage0s = pypi_table.recipes_for_table(load_recipe_yaml(recipe_path), table, recipe_path.parent)
            for entry, stage0 in zip(table.entries.values(), stage0s):
                outputs.extend(render_recipe(recipe_path, config, typed_values, arch, options, stage0,
                                             _table_entry_files(recipe_path.parent, entry)))
            continue
        outputs.extend(render_recipe(recipe_path, config, typed_values, arch, options))
    names = [o.name for o in outputs]
    for output in outputs:
        output.requires &= set(names)
        output.requires.discard(output.name)
    return outputs


def _table_entry_files(recipe_dir: Path, entry: pypi_table.Entry) -> str:
    """recipes/pypi's files as one entry's input: its own license text, not the other entries', so adding one
    rebuilds only its package (and its dependents)."""
    own_license = file_digest(recipe_dir / entry.license_file) if entry.license_file else ""
    return digest({"folder": recipe_folder_digest(recipe_dir, leave_out=pypi_table.LICENSES_FOLDER),
                   "license_file": own_license})


def render_recipe(
    recipe_path: Path, config: VariantConfig, typed_values: dict, arch: Architecture, options: Options,
    stage0: dict | None = None, recipe_files: str | None = None,
) -> list[Output]:
    """Every variant of a recipe file, or of `stage0` (a recipe filled in from that file, whose folder's files
    hash to `recipe_files`)."""
    stage0_dict = stage0 if stage0 is not None else load_recipe_yaml(recipe_path)
    try:
        if stage0 is None:
            rendered = Stage0Recipe.from_file(recipe_path).render(config)
        else:
            with tempfile.TemporaryDirectory() as scratch:  # from_dict writes the dict out as recipe_dir/recipe.yaml
                recipe = Stage0Recipe.from_dict(stage0, recipe_dir=Path(scratch))
                recipe._recipe_path = recipe_path  # as in rerender: build.sh is found beside the real recipe
                rendered = recipe.render(config)
    except Exception as exc:
        message = _one_line(exc)
        if stage0 is not None:
            entry = (stage0.get("context") or {}).get("conda_name")
            raise UserError(f"{recipe_path} filled in for {options.variants_dir.name}/{pypi_table.TABLE_FILE} {entry}: not a "
                            f"valid recipe ({message}): fix the entry or the recipe")
        raise UserError(f"{recipe_path}{_line_of(recipe_path, message)}: not a valid recipe ({message}): fix the recipe")
    recipe_files = recipe_files or recipe_folder_digest(recipe_path.parent)
    definitions = {k: str(v) for k, v in (stage0_dict.get("context") or {}).items()}
    outputs = []
    for variant in rendered:
        stage1 = variant.recipe.to_dict()
        name = stage1["package"]["name"]
        context = _jinja_context(typed_values, variant.variant)
        context.update(getattr(variant.recipe, "context", None) or {})
        skip_exprs = _skip_expressions(stage0_dict, name, context)
        output = Output(
            name=name,
            version=str(stage1["package"]["version"]),
            build_string=str(stage1.get("build", {}).get("string", "")),
            recipe_name=recipe_path.parent.name,
            recipe_path=recipe_path,
            variant={k: str(v) for k, v in variant.variant.items()},
            rendered=stage1,
            rendered_variant=variant,
            stage0=stage0_dict,
            requires=requirement_names(stage1),
            noarch=bool(stage1.get("build", {}).get("noarch")),
        )
        true_exprs = [e for e in skip_exprs if _evaluate(e, context, recipe_path)]
        if true_exprs:
            mentioned = _expand_identifiers(" ".join(true_exprs), definitions)
            output.skip_reasons = arch.reasons_for_keys(mentioned) or [f"the recipe skips it here ({' or '.join(true_exprs)})"]
        else:
            conditions = " ".join(_if_conditions(stage0_dict))
            output.notes = arch.missing_for_keys(_expand_identifiers(conditions, definitions))
        output.patches = referenced_patches(stage1, recipe_path)
        output.own_digests = own_digests(stage1, recipe_files, output.patches, output.variant, options.workspace)
        outputs.append(output)
    return outputs


def rerender(output: Output, config: VariantConfig, data: dict, scratch: Path) -> RenderedVariant:
    """Render an edited copy of an output's recipe (`data`, its stage-0 dict) for the same variant, keeping
    the recipe's real location so patches and path sources still resolve relative to it."""
    recipe = Stage0Recipe.from_dict(data, recipe_dir=scratch / "recipe")
    recipe._recipe_path = output.recipe_path  # py-rattler-build 0.73 has no public setter for this
    for variant in recipe.render(config):
        stage1 = variant.recipe.to_dict()
        # the copy may carry a key the output's render left out (a requirement under an `if:` not taken,
        # like pytorch's aotriton on gfx908): every key the output used must match
        rendered = {k: str(v) for k, v in variant.variant.items()}
        if stage1["package"]["name"] == output.name and all(rendered.get(k) == v for k, v in output.variant.items()):
            return variant
    raise RuntimeError(f"{output.label}: re-rendering an edited recipe lost the variant")


def recipe_data(output: Output) -> dict:
    """A fresh copy of the stage-0 recipe an output was rendered from, to edit and render again."""
    return copy.deepcopy(output.stage0) if output.stage0 else load_recipe_yaml(output.recipe_path)


def load_recipe_yaml(recipe_path: Path) -> dict:
    try:
        data = yaml_files.parse(recipe_path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise UserError(f"{recipe_path}:{mark.line + 1 if mark else '?'}: {problem}: fix the YAML syntax")
    if not isinstance(data, dict):
        raise UserError(f"{recipe_path}:1: a recipe must be a YAML mapping: fix the recipe")
    return data


def requirement_names(stage1: dict) -> set[str]:
    names = set()
    reqs = stage1.get("requirements", {}) or {}
    specs = [s for section in REQUIREMENT_SECTIONS for s in reqs.get(section, []) or []]
    for test in stage1.get("tests", []) or []:
        test_reqs = test.get("requirements", {}) if isinstance(test, dict) else {}
        specs += [s for section in ("build", "run") for s in (test_reqs or {}).get(section, []) or []]
    for spec in specs:
        name = _spec_name(spec)
        if name and not name.startswith("__"):
            names.add(name)
    return names


def referenced_patches(stage1: dict, recipe_path: Path) -> list[Path]:
    """Every patch the rendered sources name, and every patch the build script applies itself (named in its
    ROCM_STACK_PATCHES, recipes/_shared/record-patches.sh: a source rattler-build does not unpack, such as a
    wheel); a missing file is an error that names it."""
    patches = []
    script = (stage1.get("build") or {}).get("script")
    applied = str(((script or {}).get("env") or {}).get("ROCM_STACK_PATCHES") or "") if isinstance(script, dict) else ""
    named = [patch for source in stage1.get("source", []) or [] for patch in source.get("patches", []) or []]
    for patch in dict.fromkeys(named + applied.split()):
        path = (recipe_path.parent / str(patch)).resolve()
        if not path.is_file():
            raise UserError(f"{recipe_path}: patch {patch} does not exist ({path}): add the file or remove it from the recipe")
        patches.append(path)
    return patches


def _spec_name(spec: Any) -> str | None:
    if isinstance(spec, dict):
        for key in ("pin_subpackage", "pin_compatible"):
            if key in spec:
                inner = spec[key]
                return inner.get("name") if isinstance(inner, dict) else str(inner)
        return None
    text = str(spec).strip()
    match = re.match(r"^([A-Za-z0-9_.\-]+)", text)
    return match.group(1).lower() if match else None


def _skip_expressions(stage0: dict, output_name: str, context: dict | None = None) -> list[str]:
    """The skip conditions of the recipe and of the output named `output_name`: a templated name
    (`amd-torch-device-${{ gpu_arch }}`) is filled in from `context`, so two templated outputs keep their own."""
    exprs = _as_list((stage0.get("build") or {}).get("skip"))
    for out in stage0.get("outputs", []) or []:
        pkg = str((out.get("package") or {}).get("name", ""))
        if pkg == output_name or ("${{" in pkg and _filled_in(pkg, context) in (None, output_name)):
            exprs += _as_list((out.get("build") or {}).get("skip"))
    return [str(e) for e in exprs]


def _filled_in(template: str, context: dict | None) -> str | None:
    """A `${{ ... }}` template filled in from `context`; None where it cannot be (no context, an error)."""
    if context is None:
        return None
    try:
        return _JINJA.from_string(template.replace("${{", "{{")).render(**context)
    except jinja2.TemplateError:
        return None


def _if_conditions(node: Any) -> list[str]:
    found = []
    if isinstance(node, dict):
        if "if" in node:
            found.append(str(node["if"]))
        for value in node.values():
            found += _if_conditions(value)
    elif isinstance(node, list):
        for value in node:
            found += _if_conditions(value)
    return found


def _as_list(value: Any) -> list:
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def _expand_identifiers(expr: str, definitions: dict[str, str]) -> set[str]:
    """Identifiers in an expression, following context variables to what they are defined from."""
    found: set[str] = set()
    pending = _identifiers(expr)
    while pending:
        name = pending.pop()
        if name not in found:
            found.add(name)
            pending += _identifiers(definitions.get(name, ""))
    return found


def _identifiers(expr: str) -> list[str]:
    return re.findall(r"[A-Za-z_][A-Za-z0-9_]*", expr)


_JINJA = jinja2.Environment()


def _evaluate(expr: str, context: dict, recipe_path: Path) -> bool:
    if isinstance(expr, bool):
        return expr
    try:
        return bool(_JINJA.compile_expression(str(expr), undefined_to_none=True)(**context))
    except jinja2.TemplateError as exc:
        raise UserError(f"{recipe_path}: cannot evaluate skip condition '{expr}' ({exc}): fix the expression")


def _jinja_context(typed_values: dict, used: dict) -> dict:
    context = dict(PLATFORM_FLAGS)
    for key, values in typed_values.items():
        values = values if isinstance(values, list) else [values]
        chosen = next((v for v in values if str(v).lower() == str(used.get(key, "")).lower()), values[0] if values else None)
        context[key] = chosen
    context.update({"target_platform": used.get("target_platform", "linux-64")})
    return context


def _opt_in_flags(table: ArchitectureTable) -> set[str]:
    return {flag for arch in table.architectures.values() for flag in arch.opt_ins}


def _typed(value: str) -> Any:
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    return value


def _line_of(recipe_path: Path, message: str) -> str:
    """':N' for the line of the most specific key the error names (py-rattler-build gives none)."""
    lines = recipe_path.read_text().splitlines()
    for term in reversed(re.findall(r"'([\w.\-]+)'", message)):
        key = re.compile(rf"^\s*-?\s*{re.escape(term.split('.')[-1])}\s*:")
        for number, line in enumerate(lines, 1):
            if key.match(line):
                return f":{number}"
    return ""


def _one_line(exc: Exception) -> str:
    text = " ".join(str(exc).split())
    return text[:400]
