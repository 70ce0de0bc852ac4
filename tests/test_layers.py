"""The orchestrator's modules keep to five layers (docs/orchestrator.md, "The modules"): each imports only
layers below it, nothing imports in a circle, every module is classified, and none is over 500 lines.

The checker reads every import statement with `ast` (absolute and relative, at module level and inside
functions), so an import a reader would miss still counts. The last test runs it on a small made-up package
with a cycle and an upward import, so the checker is known to fail when it should."""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "orchestrate"
DOCS_PAGE = PACKAGE_DIR.parent / "docs" / "orchestrator.md"
MAX_LINES = 500

# Lowest first; a module may import its own layer (acyclically) and every layer below it. The Face may
# import anything.
FACE, COMMANDS, WORK, DECLARATIONS, BASE = "Face", "Commands", "Work", "Declarations", "Base"
ORDER = {BASE: 0, DECLARATIONS: 1, WORK: 2, COMMANDS: 3, FACE: 4}

LAYERS = {
    # Face: argv, the supervisor process, exit codes
    "__init__": FACE, "__main__": FACE, "launch": FACE, "cli": FACE, "reference": FACE, "plan_view": FACE,
    # Commands: one module per user command
    "runner": COMMANDS, "fetch": COMMANDS, "doctor": COMMANDS, "doctor_gpus": COMMANDS, "pins": COMMANDS, "contract": COMMANDS,
    "import_contract": COMMANDS, "lint": COMMANDS,
    "clean": COMMANDS, "pypi": COMMANDS, "resolve": COMMANDS, "neutral": COMMANDS,
    "share": COMMANDS, "share.publish": COMMANDS, "share.serve": COMMANDS, "share.cache": COMMANDS,
    "share.consumer": COMMANDS, "share.verify": COMMANDS, "share.consumer_verify": COMMANDS,
    "share.page": COMMANDS, "share.page.model": COMMANDS, "share.page.render": COMMANDS, "share.page.plot": COMMANDS,
    "share.page.command": COMMANDS,
    "bump": COMMANDS, "bump.decide": COMMANDS, "bump.torch_group": COMMANDS,
    "bump.write": COMMANDS, "bump.prove": COMMANDS, "bump.report": COMMANDS,
    "share.channel_page": COMMANDS,
    # Work: build one package, keep the channel, explain a failure, store a shared channel
    "builder": WORK, "benchlog": WORK, "channel": WORK, "diagnose": WORK, "graph": WORK, "estimates": WORK, "plan_sources": WORK,
    "share.targets": WORK, "share.store": WORK, "share.s3": WORK, "share.credentials": WORK, "share.lookup": WORK,
    "share.bench": WORK, "share.untrusted": WORK, "share.signing": WORK, "share.link_scripts": WORK,
    "share.payload": WORK, "share.package_files": WORK, "release_files": WORK,
    # Declarations: what recipes and tables declare, rendered
    "recipes": DECLARATIONS, "arch_set": DECLARATIONS, "prebuilt": DECLARATIONS, "architectures": DECLARATIONS, "upstreams": DECLARATIONS,
    "sources": DECLARATIONS, "imports": DECLARATIONS, "pypi_table": DECLARATIONS, "input_hash": DECLARATIONS,
    # Base: errors, HTTP, signals, options, output
    "errors": BASE, "web": BASE, "grammar": BASE, "stops": BASE, "channels": BASE, "options": BASE, "crashpoints": BASE,
    "detect": BASE, "arch_list": BASE, "ui": BASE, "package_index": BASE, "yaml_files": BASE, "glibc": BASE,
    "key_text": BASE, "toml_words": BASE,
}


@dataclass(frozen=True)
class Edge:
    source: str  # module names relative to the package: "cli", "share.publish"
    target: str
    file: Path
    line: int

    def where(self, root: Path) -> str:
        return f"{self.file.relative_to(root.parent)}:{self.line}"


def module_name(path: Path, package_dir: Path) -> str:
    parts = list(path.relative_to(package_dir).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


def import_edges(package_dir: Path, package: str) -> tuple[dict[str, Path], list[Edge]]:
    """Every module of the package (name -> file) and every import of one module by another."""
    modules = {module_name(path, package_dir): path for path in sorted(package_dir.rglob("*.py"))}
    edges = []
    for source, path in modules.items():
        is_package = path.name == "__init__.py"
        here = source.split(".") if source != "__init__" else []
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [t for t in (_in_package(a.name, package, modules) for a in node.names) if t]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from the module's own package, up level - 1
                    base = here if is_package else here[:-1]
                    base = base[:len(base) - (node.level - 1)]
                    prefix = ".".join([package, *base, *(node.module.split(".") if node.module else [])])
                else:
                    prefix = node.module or ""
                # `from . import x` and `from .share import cache` import the submodule where one exists;
                # any other name comes from the module itself
                submodules = [_in_package(f"{prefix}.{a.name}", package, modules) for a in node.names]
                targets = [t for t in submodules if t]
                if len(targets) < len(node.names) and _in_package(prefix, package, modules):
                    targets.append(_in_package(prefix, package, modules))
            edges += [Edge(source, target, path, node.lineno) for target in targets if target != source]
    return modules, _unique(edges)


def _in_package(dotted: str, package: str, modules: dict[str, Path]) -> str | None:
    if dotted == package:
        return "__init__"
    if not dotted.startswith(package + "."):
        return None
    name = dotted[len(package) + 1:]
    return name if name in modules else None


def _unique(edges: list[Edge]) -> list[Edge]:
    seen, kept = set(), []
    for edge in edges:
        if (edge.source, edge.target, edge.line) not in seen:
            seen.add((edge.source, edge.target, edge.line))
            kept.append(edge)
    return kept


def find_cycles(edges: list[Edge]) -> list[list[Edge]]:
    """One cycle (as its edges) per strongly connected group of modules (Tarjan's algorithm)."""
    graph: dict[str, list[Edge]] = {}
    for edge in edges:
        graph.setdefault(edge.source, []).append(edge)
        graph.setdefault(edge.target, [])
    index, low, stack, on_stack, groups = {}, {}, [], set(), []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for edge in graph[node]:
            if edge.target not in index:
                visit(edge.target)
                low[node] = min(low[node], low[edge.target])
            elif edge.target in on_stack:
                low[node] = min(low[node], index[edge.target])
        if low[node] == index[node]:
            group = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.add(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(group)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [_cycle_in(group, graph) for group in groups]


def _cycle_in(group: set[str], graph: dict[str, list[Edge]]) -> list[Edge]:
    """The shortest way round from the group's first module back to itself."""
    start = min(group)
    paths = {start: []}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for edge in graph[node]:
            if edge.target == start:
                return paths[node] + [edge]
            if edge.target in group and edge.target not in paths:
                paths[edge.target] = paths[node] + [edge]
                queue.append(edge.target)
    raise AssertionError(f"no way round {sorted(group)}")


def layer_problems(package_dir: Path, package: str, layers: dict[str, str], max_lines: int) -> list[str]:
    """What breaks the layers, one line each, naming the file (and line) to change."""
    modules, edges = import_edges(package_dir, package)
    root = package_dir
    problems = []
    for name, path in modules.items():
        if name not in layers:
            problems.append(f"{path.relative_to(root.parent)}: module {name} is in no layer: add it to LAYERS "
                            "in tests/test_layers.py (and docs/orchestrator.md)")
        lines = len(path.read_text().splitlines())
        if lines > max_lines:
            problems.append(f"{path.relative_to(root.parent)}: {lines} lines, over {max_lines}: split it by job")
    for name in sorted(set(layers) - set(modules)):
        problems.append(f"LAYERS names {name}, which is not a module of {package}: remove it")
    for edge in edges:
        source, target = layers.get(edge.source), layers.get(edge.target)
        if source and target and source != FACE and ORDER[target] > ORDER[source]:
            problems.append(f"{edge.where(root)}: {edge.source} ({source}) imports {edge.target} ({target}), "
                            "a higher layer")
    for cycle in find_cycles(edges):
        route = " -> ".join([cycle[0].source] + [e.target for e in cycle])
        problems.append(f"import cycle {route}: " + ", ".join(e.where(root) for e in cycle))
    return problems


def test_orchestrate_keeps_its_layers():
    problems = layer_problems(PACKAGE_DIR, "orchestrate", LAYERS, MAX_LINES)
    assert not problems, "\n".join(problems)


def test_the_recipes_shared_python_scripts_keep_the_module_size_too():
    """recipes/_shared/*.py (the wheel installer and its siblings) are split by job, as orchestrate/'s modules are."""
    scripts = sorted((PACKAGE_DIR.parent / "recipes" / "_shared").glob("*.py"))
    assert len(scripts) >= 3
    too_long = {p.name: n for p in scripts if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not too_long, f"over {MAX_LINES} lines: split by job: {too_long}"


def test_the_docs_table_says_what_the_layers_are():
    """docs/orchestrator.md "The modules" lists each module (`share/x` for share.x) in its layer's row."""
    section = DOCS_PAGE.read_text().split("## The modules", 1)[1].split("\n## ", 1)[0]
    documented = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 2 and cells[0] in ORDER:
            for name in re.findall(r"`([\w/]+)`", cells[1]):
                documented[name.replace("/", ".")] = cells[0]
    differ = [f"{name}: LAYERS says {LAYERS.get(name, 'nothing')}, {DOCS_PAGE.name} says {documented.get(name, 'nothing')}"
              for name in sorted(set(LAYERS) | set(documented)) if LAYERS.get(name) != documented.get(name)]
    assert not differ, "fix the table in docs/orchestrator.md or LAYERS:\n" + "\n".join(differ)


def test_checker_reads_every_kind_of_import():
    modules, edges = import_edges(PACKAGE_DIR, "orchestrate")
    pairs = {(e.source, e.target) for e in edges}
    assert ("cli", "share.cache") in pairs  # inside a function, a submodule of a subpackage
    assert ("cli", "share") in pairs  # from .share import COMMANDS
    assert ("share.publish", "stops") in pairs  # from .. import stops
    assert ("crashpoints", "stops") in pairs  # function-level
    assert ("__main__", "launch") in pairs
    assert "share" in modules and "share.targets" in modules


def test_checker_reports_a_cycle_an_upward_import_and_what_the_table_lacks(tmp_path):
    package = tmp_path / "toy"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("import os\n\nfrom toy.sub import c\n")
    (package / "sub" / "c.py").write_text("def f():\n    from ..a import thing\n")
    (package / "low.py").write_text("import json\n\n\ndef g():\n    from .high import run\n")
    (package / "high.py").write_text("import json\n")
    (package / "stray.py").write_text("x = 1\n" * 12)
    layers = {"__init__": FACE, "a": COMMANDS, "b": COMMANDS, "sub": COMMANDS, "sub.c": COMMANDS,
              "low": BASE, "high": COMMANDS, "gone": WORK}

    problems = layer_problems(package, "toy", layers, max_lines=10)

    assert "toy/low.py:5: low (Base) imports high (Commands), a higher layer" in problems
    cycles = [p for p in problems if p.startswith("import cycle")]
    assert cycles == ["import cycle a -> b -> sub.c -> a: toy/a.py:1, toy/b.py:3, toy/sub/c.py:2"], problems
    assert any(p.startswith("toy/stray.py: module stray is in no layer") for p in problems)
    assert "toy/stray.py: 12 lines, over 10: split it by job" in problems
    assert "LAYERS names gone, which is not a module of toy: remove it" in problems
    assert len(problems) == 5, problems
