"""One environment for several GPUs (`--arch gfx942,gfx950 --one-environment`), as AMD's pip install does it with
`torch[device-gfx942,device-gfx950]`: host code once, device code per target.

A *set* of architectures is rendered as one more architecture:
- its name is "multi" and its members, in the table's order (`multi_gfx942_gfx950`): the token its build strings carry
  (`rocm101_multi_gfx942_gfx950_py312_…`; a build string takes letters, digits and "_" only), which a one-target pin
  (`rocm101_gfx942_*`) never matches;
- its ISA is a conda version OR (`__amdgpu_arch ==9.4.2|==9.5.0`): the solver installs the set on a machine whose GPU
  is any member (rattler solves it; tests/test_arch_set.py checks it with CONDA_OVERRIDE_AMDGPU_ARCH for each ISA);
- its capabilities are the intersection of its members' (read from variants/architectures.yaml, with the reason of
  each member that lacks one): vLLM for gfx942 and gfx1151 is what both have;
- `gpu_arch_list` (`gfx942,gfx950`) is the list its scripts get as GPU_ARCH; recipes/_shared/rocm-env.sh passes it on
  as the ";" list compilers take (PYTORCH_ROCM_ARCH, GPU_ARCHS for flash-attn's and aiter's --offload-arch, CMake's).

A recipe is rendered for a set from an expanded copy of its stage-0 recipe (expand_for_set):
- a script's `GPU_ARCH: ${{ gpu_arch }}` becomes the list, and so does `${{ gpu_arch }}` in its tests;
- every requirement whose package name is per target (`rocm-sdk-device-${{ gpu_arch }}`, `"amd-torch-device-" ~
  gpu_arch`) becomes one requirement per member (rattler-build cannot expand a list-valued variant into several
  requirements: "Invalid match spec"), and `__amdgpu_arch ==${{ amdgpu_isa }}` becomes the set's OR;
- an output that *is* a per-target package (`amd-torch-device-${{ gpu_arch }}`) is left out: each member's own render
  builds it (render_set), and the members' packages install side by side;
- a package that merges AMD's per-GPU device wheel (prebuilt torchvision) installs every member's.
"""
from __future__ import annotations

import copy
import dataclasses
import re
from typing import Any

from .architectures import Architecture, ArchitectureTable, Capability
from .errors import UserError

SET_PREFIX = "multi"
ARCH_LIST_KEY = "gpu_arch_list"
ARCH_LIST_JOIN = ","  # shell-safe in scripts and tests; rocm-env.sh passes it on as the ";" list compilers take
# a capability's values from least to most: a set has the least of its members'
_RANK = {"no": 0, "experimental": 1, "yes": 2}
_REQUIREMENT_SECTIONS = ("build", "host", "run", "run_constraints")
_EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.S)
_PIN_SUBPACKAGE = re.compile(r"""^\$\{\{\s*pin_subpackage\((.+?)(?:,\s*exact\s*=\s*True)?\s*\)\s*\}\}$""")
_ARCH_LIST = "${{ " + ARCH_LIST_KEY + " }}"
# flash-attn's and aiter's GPU_ARCHS, read at run time too (aiter's JIT), is split at ";"
_SEMICOLON_LIST = "${{ " + ARCH_LIST_KEY + ' | replace(",", ";") }}'
_DEVICE_URL = re.compile(r"\$\{\{\s*(\w+_device)_url\s*\}\}")
_GPU_ARCH = re.compile(r"\$\{\{\s*gpu_arch\s*\}\}")
_NAME = re.compile(r"(?:\$\{\{.*?\}\}|[^\s])*", re.S)
_AMDGPU_ARCH = re.compile(r"^__amdgpu_arch\s*==\$\{\{\s*amdgpu_isa\s*\}\}$")


@dataclasses.dataclass(frozen=True)
class ArchSet:
    members: tuple[Architecture, ...]

    @property
    def names(self) -> list[str]:
        return [m.name for m in self.members]

    @property
    def name(self) -> str:
        return "_".join([SET_PREFIX, *self.names])

    @property
    def isa_spec(self) -> str:
        """The `__amdgpu_arch` version spec that any member's GPU satisfies."""
        return "|".join(f"=={m.isa}" for m in self.members)

    def architecture(self) -> Architecture:
        """The set as one row: the intersection of its members' capabilities, each lacking one naming why."""
        first = self.members[0]
        caps = {name: _least([m.capabilities[name] for m in self.members], name) for name in first.capabilities}
        prebuilt = _least([m.prebuilt_torch for m in self.members], "prebuilt_torch")
        return Architecture(
            name=self.name, product=" + ".join(m.product for m in self.members),
            isa="|".join(m.isa for m in self.members), torch_device_family="",
            # aotriton builds a kernel image folder per target (AOTRITON_TARGET_ARCH takes the list); what a recipe test
            # looks for is the first member's
            aotriton_image_family=first.aotriton_image_family or first.name, capabilities=caps,
            opt_ins={flag: why for flag, why in first.opt_ins.items() if all(flag in m.opt_ins for m in self.members)},
            apu=any(m.apu for m in self.members), prebuilt_torch=prebuilt,
            flash_attn_preference=first.flash_attn_preference)

    def variant_keys(self) -> dict[str, list]:
        """The keys a recipe sees for the set: the set's row's, and the list compilers take."""
        keys = self.architecture().variant_keys()
        keys[ARCH_LIST_KEY] = [ARCH_LIST_JOIN.join(self.names)]
        return keys


def arch_set(table: ArchitectureTable, names: list[str]) -> ArchSet:
    """The set of the named architectures (each checked against the table), in the table's order, so that the same
    GPUs are the same package whoever lists them and in whatever order."""
    members = [table.get(name) for name in names]
    if len(members) < 2:
        raise UserError("one environment for several GPUs needs at least two architectures "
                        f"(got {', '.join(names) or 'none'}): pass e.g. --arch gfx942,gfx950")
    order = table.names()
    return ArchSet(tuple(sorted(members, key=lambda m: order.index(m.name))))


def _least(caps: list[Capability], name: str) -> Capability:
    worst = min(caps, key=lambda c: _RANK.get(c.value, 0))
    if worst.value == "yes":
        return Capability(name, "yes", caps[0].why)
    return Capability(name, worst.value, "; ".join(f"{c.why}" for c in caps if c.value != "yes" and c.why))


def _mentions_arch(text: str) -> bool:
    return "gpu_arch" in "".join(_EXPR.findall(text)) or "amdgpu_isa" in "".join(_EXPR.findall(text))


def _for_member(text: str, member: Architecture) -> str:
    """`text` with the set's per-target keys filled in with one member's values, inside every ${{ }}."""
    def fill(match: re.Match) -> str:
        expr = re.sub(r"\bgpu_arch\b", f'"{member.name}"', match.group(1))
        return "${{" + re.sub(r"\bamdgpu_isa\b", f'"{member.isa}"', expr) + "}}"
    return _EXPR.sub(fill, text)


def _expand_requirement(item: str, arch_set: ArchSet, version: str) -> list[str]:
    text = str(item).strip()
    if _AMDGPU_ARCH.match(text):
        return [f"__amdgpu_arch {arch_set.isa_spec}"]
    name_part = _NAME.match(text).group(0)  # up to the first space outside ${{ }}
    if not _mentions_arch(name_part):
        return [item]
    pinned = _PIN_SUBPACKAGE.match(text)
    if pinned:  # a pin of a per-target output, which this render leaves out: each member's, at this output's version
        text = f"${{{{ {pinned.group(1)} }}}} =={version}"
    return [_for_member(text, member) for member in arch_set.members]


def _expand_list(items: list, arch_set: ArchSet, version: str) -> list:
    result: list = []
    for item in items:
        if isinstance(item, str):
            result.extend(_expand_requirement(item, arch_set, version))
        elif isinstance(item, dict) and "if" in item:  # if/then/else: each branch expanded
            branch = dict(item)
            for key in ("then", "else"):
                if key in branch:
                    value = branch[key]
                    branch[key] = _expand_list(value if isinstance(value, list) else [value], arch_set, version)
            result.append(branch)
        else:
            result.append(item)
    return result


def _expand_requirements(node: Any, arch_set: ArchSet, version: str) -> None:
    """Expand every requirement list in a stage-0 node (the recipe, an output, a test) in place; `version`: the
    version expression of the package the node belongs to."""
    if isinstance(node, dict):
        version = str(((node.get("package") or {}).get("version")) or version)
        for key, value in node.items():
            if key == "env" and isinstance(value, dict):  # GPU_ARCH: ${{ gpu_arch }} -> the list the build compiles for
                node[key] = {k: (_SEMICOLON_LIST if k == "GPU_ARCHS" else _ARCH_LIST) if _GPU_ARCH.fullmatch(str(v).strip())
                             else _each_member_word(v, arch_set) for k, v in value.items()}
            elif key == "requirements" and isinstance(value, dict):
                for section in _REQUIREMENT_SECTIONS:
                    if isinstance(value.get(section), list):
                        value[section] = _expand_list(value[section], arch_set, version)
            else:
                _expand_requirements(value, arch_set, version)
                if key == "tests":  # what a test compares the build with (--expect-arch, the files it wrote): the list
                    node[key] = _with_list(node[key])
    elif isinstance(node, list):
        for item in node:
            _expand_requirements(item, arch_set, version)


def _each_member_word(value: Any, arch_set: ArchSet) -> Any:
    """An env value's words that name a per-target package (SATISFIED_BY: rocm-sdk-device-${{ gpu_arch }}), one per
    member."""
    if not isinstance(value, str) or not _GPU_ARCH.search(value):
        return value
    words = []
    for word in re.findall(r"(?:\$\{\{.*?\}\}|\S)+", value):
        words += [_for_member(word, m) for m in arch_set.members] if _GPU_ARCH.search(word) else [word]
    return " ".join(words)


def _each_member_device_wheel(output: dict, arch_set: ArchSet) -> None:
    """A package that merges AMD's per-GPU device wheel (torchvision: `${{ torchvision_device_url }}`) gets every
    member's, downloaded under its own name and installed by the same script (set_config adds the members' keys)."""
    sources = output.get("source")
    if not isinstance(sources, list):
        return
    renamed: dict[str, list[str]] = {}
    expanded = []
    for source in sources:
        found = _DEVICE_URL.fullmatch(str(source.get("url", "")).strip()) if isinstance(source, dict) else None
        if not found:
            expanded.append(source)
            continue
        key, name = found.group(1), str(source.get("file_name") or "")
        stem, dot, suffix = name.rpartition(".")
        for member in arch_set.members:
            file_name = f"{stem}-{member.name}{dot}{suffix}" if dot else f"{name}-{member.name}"
            renamed.setdefault(name, []).append(file_name)
            expanded.append({**source, "url": "${{ " + f"{key}_{member.name}_url" + " }}",
                             "sha256": "${{ " + f"{key}_{member.name}_sha256" + " }}", "file_name": file_name})
    output["source"] = expanded
    script = (output.get("build") or {}).get("script")
    if renamed and isinstance(script, dict) and isinstance(script.get("content"), str):
        for name, names in renamed.items():
            script["content"] = re.sub(rf"(?<!\S){re.escape(name)}(?!\S)", " ".join(names), script["content"])


def _with_list(node: Any) -> Any:
    if isinstance(node, str):
        return _GPU_ARCH.sub(_ARCH_LIST, node)
    if isinstance(node, list):
        return [_with_list(item) for item in node]
    if isinstance(node, dict):
        return {key: _with_list(value) for key, value in node.items()}
    return node


def expand_for_set(stage0: dict, arch_set: ArchSet) -> dict:
    """A copy of a stage-0 recipe to render for a set: per-target requirements once per member, the set's ISA OR,
    and the recipe's per-target outputs left out (each member's render builds its own)."""
    data = copy.deepcopy(stage0)
    if isinstance(data.get("outputs"), list):
        data["outputs"] = [o for o in data["outputs"] if not _mentions_arch(str((o.get("package") or {}).get("name") or ""))]
        for output in data["outputs"]:
            _each_member_device_wheel(output, arch_set)
    for node in data.get("outputs") or [data]:
        build = node.get("build") if isinstance(node, dict) else None
        if isinstance(build, dict) and _GPU_ARCH.search(str(build.get("string", ""))):
            _down_prioritized(build)
    version = str((data.get("recipe") or {}).get("version") or (data.get("package") or {}).get("version") or "")
    _expand_requirements(data, arch_set, version)
    return data


def _down_prioritized(build: dict) -> None:
    """A set's build (its build string names the set) ranks below one GPU's in a solve that names neither: in a team
    channel with both, a one-GPU machine keeps its lean build; a machine with several asks for the set
    (`rocm-stack * multi_gfx942_gfx950_*`). One more track_feature than the recipe's own ranking gives."""
    variant = dict(build.get("variant") or {})
    own = str(variant.get("down_prioritize_variant", 0)).strip()
    own = own[3:-2].strip() if own.startswith("${{") and own.endswith("}}") else own
    variant["down_prioritize_variant"] = "${{ 1 + (" + own + ") }}"
    build["variant"] = variant


def is_per_target(name: str, arch_set: ArchSet) -> bool:
    """Whether a rendered package belongs to one target (its name carries the set's token): left to the members."""
    return arch_set.name in name


def members_of(name: str) -> list[str]:
    """The architectures of a set's name (multi_gfx942_gfx950), [] for one architecture's."""
    prefix, *members = name.split("_")
    return members if prefix == SET_PREFIX and len(members) > 1 else []


def plan_inputs(options, table: ArchitectureTable, names: list[str]):
    """What `plan --one-environment` plans from: the set's row, its variant choice and its packages."""
    from .prebuilt import Prebuilt
    from .recipes import VariantChoice

    pair = arch_set(table, names)
    config = set_config(options, table, pair)
    # AMD's artifacts as the members' plans see them: build-all locks an incomplete lock first, plan names their origin
    choice = VariantChoice(config, None, Prebuilt.load(options.variants_dir), config.to_dict())
    return pair.architecture(), choice, render_set(options, table, pair, config)


def set_config(options, table: ArchitectureTable, arch_set: ArchSet):
    """The variant config a set renders with: its first member's (shared.yaml, the pins, the arch-neutral prebuilt
    keys such as torch's host wheel), the set's own keys over it. PyTorch comes from AMD's wheels only where it does
    for every member; else every member's device code is compiled into one build from source."""
    import json

    from rattler_build import VariantConfig

    from .prebuilt import PYTORCH_FROM
    from .recipes import variant_choice

    choices = [variant_choice(options, table, member) for member in arch_set.members]
    keys: dict[str, Any] = {key: value[0] for key, value in arch_set.variant_keys().items() if len(value) == 1}
    for member, choice in zip(arch_set.members, choices):  # each GPU's device wheels, for _each_member_device_wheel:
        for key, value in choice.values.items():  # torchvision_device_gfx942_url, _sha256 (an empty one: not locked)
            for suffix in ("_url", "_sha256"):
                if key.endswith("_device" + suffix):
                    keys[f"{key[:-len(suffix)]}_{member.name}{suffix}"] = value[0] if isinstance(value, list) else value
    froms = {c.pytorch.value for c in choices if c.pytorch is not None}
    if froms:
        keys[PYTORCH_FROM] = "prebuilt" if froms == {"prebuilt"} else "source"
    config = choices[0].config.merge(VariantConfig.from_yaml("\n".join(f"{k}: [{json.dumps(v)}]" for k, v in keys.items())))
    backends = arch_set.variant_keys()["flash_attn_backend"]
    return config.merge(VariantConfig.from_yaml(f"flash_attn_backend: {json.dumps(backends)}"))


def render_set(options, table: ArchitectureTable, arch_set: ArchSet, config=None) -> list:
    """Every package one environment for the set needs: each recipe rendered once for the set (fat builds naming
    the set), and each member's per-target packages (its device packages) from the member's own render."""
    from .pypi_table import RECIPE_FOLDER as PYPI_FOLDER
    from .recipes import discover, load_recipe_yaml, render_all, render_recipe, variant_config

    config = config or set_config(options, table, arch_set)
    typed = config.to_dict()
    row = arch_set.architecture()
    outputs = []
    for recipe_path in discover(options.recipes_dir):
        if recipe_path.parent.name == PYPI_FOLDER:  # arch-neutral PyPI repacks: taken from the first member's render
            continue
        stage0 = expand_for_set(load_recipe_yaml(recipe_path), arch_set)
        try:
            rendered = render_recipe(recipe_path, config, typed, row, options, stage0)
        except UserError as exc:  # render_recipe names a filled-in recipe as a PyPI entry's: say what it was filled for
            cause = str(exc).split(": not a valid recipe ", 1)[-1]
            raise UserError(f"{recipe_path} rendered for {arch_set.name} (one environment for {', '.join(arch_set.names)}): "
                            f"not a valid recipe {cause}") from None
        outputs += [o for o in rendered if not is_per_target(o.name, arch_set)]
    seen = {(o.name, o.build_string) for o in outputs}
    for index, member in enumerate(arch_set.members):
        own = {member.name, member.torch_device_family} - {""}
        member_config = variant_config(options, table, member)
        for output in render_all(options, member_config, member):
            output.config = member_config  # built as the member's own plan builds it: the same package, the same hash
            mine = any(token in output.name for token in own) or (index == 0 and output.recipe_name == PYPI_FOLDER)
            if mine and (output.name, output.build_string) not in seen:  # a family's package: once, for its first member
                seen.add((output.name, output.build_string))
                outputs.append(output)
    names = {o.name for o in outputs}
    for output in outputs:
        output.requires &= names
        output.requires.discard(output.name)
    return outputs
