"""Which third-party modules a Python package imports on a given path, read from its source (no import).

`import_closure` starts at root modules and follows the imports that run when a module is imported:
module-level statements, class bodies, both branches of an `if`, `with`/`for`/`while` bodies. It skips what
runs only later or only optionally:
  - function and lambda bodies (they run when called; an entry point's own function is the exception:
    `Root("pkg.cli.main", function="main")` also follows the imports at the top of main(), since running
    the command runs them);
  - `if TYPE_CHECKING:` blocks (and the `else` of `if not TYPE_CHECKING:`);
  - a `try:` whose handlers catch ImportError or ModuleNotFoundError (the module copes without the import):
    its body, handlers and `else` are optional.
Imports inside the package (absolute, relative, and `from pkg import submodule`) are followed transitively,
parents' `__init__` included; every other top-level module outside the standard library is reported with
the first place that imports it. `importlib.import_module` calls and string-named lazy loaders are not seen.

`conda_name` maps a module to the conda package that provides it: module → PyPI distribution (explicit table
where the names differ, else the module name) → conda package (explicit table where conda's name differs,
else the PyPI name normalized).
"""
from __future__ import annotations

import ast
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

# Exceptions whose handler means "this import is optional".
OPTIONAL_IMPORT_ERRORS = {"ImportError", "ModuleNotFoundError"}

# Top-level module -> PyPI distribution, where they differ after normalization (a module with no entry is
# its own distribution: `partial_json_parser` is partial-json-parser).
MODULE_DISTRIBUTIONS = {
    "PIL": "pillow",
    "yaml": "pyyaml",
    "zmq": "pyzmq",
    "cv2": "opencv-python-headless",
    "google": "protobuf",  # google.protobuf, the only google.* namespace vLLM imports
    "cpuinfo": "py-cpuinfo",
    "openai_harmony": "oss-harmony",  # vLLM requires the fork; openai-harmony ships the same module
    "pythonjsonlogger": "python-json-logger",
    "multipart": "python-multipart",
    "dateutil": "python-dateutil",
    "jwt": "pyjwt",
    "sklearn": "scikit-learn",
    "attr": "attrs",
    "grpc": "grpcio",
    "grpc_reflection": "grpcio-reflection",
    "opentelemetry": "opentelemetry-api",
    "lmformatenforcer": "lm-format-enforcer",
    "aiter": "amd-aiter",
    "conch": "conch-triton-kernels",
    "quark": "amd-quark",
    "mooncake": "mooncake-transfer-engine-rocm",
    "tvm_ffi": "apache-tvm-ffi",
}

# PyPI distribution (normalized) -> conda package, where conda's name is not the normalized PyPI name: our
# own builds (one torch, named as conda-forge names it) and conda-forge's spellings. Names are compared
# after normalization, so conda-forge's prometheus_client matches prometheus-client without an entry.
CONDA_NAMES = {
    "torch": "pytorch",
    "amd-aiter": "aiter",
    "opencv-python-headless": "opencv",
    "opencv-python": "opencv",
}


def normalize(name: str) -> str:
    """PEP 503 normalization of a distribution name (what conda names of PyPI projects follow, too)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def distribution_of(module: str) -> str:
    top = module.split(".", 1)[0]
    return normalize(MODULE_DISTRIBUTIONS.get(top, top))


def conda_name(distribution: str) -> str:
    """The conda package for a PyPI distribution (names compared after normalization)."""
    key = normalize(distribution)
    return CONDA_NAMES.get(key, key)


@dataclass(frozen=True)
class Root:
    module: str
    function: str | None = None  # an entry point's function: its top-level imports run too


@dataclass
class Closure:
    """What importing the roots imports: the package's own modules, and third-party top-level modules with the
    first place that imports each ("path:line"). `conditional` holds those imported only under a module-level
    `if` (a platform or setting check), with the condition where the import sits under one directly."""

    package_modules: set[str] = field(default_factory=set)
    third_party: dict[str, str] = field(default_factory=dict)
    conditional: dict[str, str] = field(default_factory=dict)
    compiled: dict[str, str] = field(default_factory=dict)  # package modules without source (extensions)


def import_closure(source_root: Path, package: str, roots: list[Root]) -> Closure:
    """Follow imports from `roots` through the package whose source is `source_root/package`."""
    closure = Closure()
    always = _follow(source_root, package, roots, closure, with_conditional=False)
    everything = _follow(source_root, package, roots, Closure(), with_conditional=True)
    closure.conditional = {m: where for m, where in everything.items() if m not in always}
    closure.third_party = always
    return closure


def _follow(source_root: Path, package: str, roots: list[Root], closure: Closure, with_conditional: bool) -> dict[str, str]:
    third_party: dict[str, str] = {}
    queue: list[tuple[str, list[ast.stmt] | None]] = []
    for root in roots:
        queue.append((root.module, None))
        if root.function:
            queue.append((root.module, _function_body(source_root, root)))
    while queue:
        module, function_body = queue.pop()
        if function_body is None:
            if module in closure.package_modules:
                continue
            closure.package_modules.add(module)
        path = module_path(source_root, module)
        if path is None:
            continue
        tree = ast.parse(path.read_text(), str(path))
        statements = function_body if function_body is not None else tree.body
        is_package = path.name == "__init__.py"
        for name, line, maybe_attribute, condition in _imports(statements, module, is_package, with_conditional):
            where = f"{path.relative_to(source_root)}:{line}" + (f" (under `if {condition}`)" if condition else "")
            top = name.split(".", 1)[0]
            if top == package:
                if maybe_attribute and not _is_module(source_root, name):
                    continue  # `from pkg.x import name`: a function or class, not a submodule
                for candidate in _with_parents(name):
                    if not _is_module(source_root, candidate):
                        closure.compiled.setdefault(candidate, where)
                    elif candidate not in closure.package_modules:
                        queue.append((candidate, None))
            elif not maybe_attribute and top not in sys.stdlib_module_names:
                third_party.setdefault(top, where)
    return third_party


def _function_body(source_root: Path, root: Root) -> list[ast.stmt]:
    path = module_path(source_root, root.module)
    if path is None:
        raise FileNotFoundError(f"{root.module} has no source under {source_root}")
    tree = ast.parse(path.read_text(), str(path))
    body = next((n.body for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.name == root.function), None)
    if body is None:
        raise LookupError(f"{root.module} defines no function {root.function}")
    return body


def module_path(source_root: Path, module: str) -> Path | None:
    base = source_root.joinpath(*module.split("."))
    for path in (base / "__init__.py", base.with_suffix(".py")):
        if path.is_file():
            return path
    return None


def _is_module(source_root: Path, module: str) -> bool:
    """A module with source, or a namespace package (a folder without __init__.py)."""
    return module_path(source_root, module) is not None or source_root.joinpath(*module.split(".")).is_dir()


def _with_parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _imports(statements: list[ast.stmt], module: str, is_package: bool, with_conditional: bool, condition: str | None = None):
    """(absolute module name, line, maybe_attribute, condition) for each import these statements run.

    `from X import a` yields X, and X.a with maybe_attribute=True: X.a is imported only if it is a
    submodule, which the caller decides by looking for its source. Branches of an `if` (other than
    TYPE_CHECKING) are followed only when with_conditional is set; condition is the innermost test."""
    def inner(body, test=condition):
        return _imports(body, module, is_package, with_conditional, test)

    for node in statements:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, False, condition
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            yield base, node.lineno, False, condition
            for alias in node.names:
                if alias.name != "*":
                    yield f"{base}.{alias.name}", node.lineno, True, condition
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        elif isinstance(node, ast.If):
            checking = _type_checking(node.test)
            if checking is True:
                yield from inner(node.orelse)
            elif checking is False:
                yield from inner(node.body)
            elif with_conditional:
                test = ast.unparse(node.test)
                yield from inner(node.body, test)
                yield from inner(node.orelse, f"not ({test})")
        elif isinstance(node, ast.Try) or (sys.version_info >= (3, 11) and isinstance(node, ast.TryStar)):
            if not any(_catches_import_error(h) for h in node.handlers):
                yield from inner(node.body)
                for handler in node.handlers:
                    yield from inner(handler.body)
                yield from inner(node.orelse)
            yield from inner(node.finalbody)
        elif isinstance(node, ast.ClassDef):
            yield from inner(node.body)
        elif isinstance(node, (ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)):
            yield from inner(node.body)
            yield from inner(getattr(node, "orelse", []))
        elif hasattr(ast, "Match") and isinstance(node, ast.Match):
            for case in node.cases:
                yield from inner(case.body)


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    parts = module.split(".") if is_package else module.split(".")[:-1]
    parts = parts[: len(parts) - (node.level - 1)]
    return ".".join(parts + ([node.module] if node.module else []))


def _type_checking(test: ast.expr) -> bool | None:
    """True for `TYPE_CHECKING` (or `typing.TYPE_CHECKING`), False for its negation, None otherwise."""
    def named(expr):
        return (isinstance(expr, ast.Name) and expr.id == "TYPE_CHECKING") or \
               (isinstance(expr, ast.Attribute) and expr.attr == "TYPE_CHECKING")
    if named(test):
        return True
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not) and named(test.operand):
        return False
    return None


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type
    names = kinds.elts if isinstance(kinds, ast.Tuple) else [kinds] if kinds is not None else []
    return any((isinstance(n, ast.Name) and n.id in OPTIONAL_IMPORT_ERRORS) or
               (isinstance(n, ast.Attribute) and n.attr in OPTIONAL_IMPORT_ERRORS) for n in names)


# --- which modules of another package a package imports anywhere --------------------------------------------

Need = tuple  # (module, "path:line", maybe_attribute), or a tuple of alternatives: lists of needs, any one suffices


def needed_modules(source_root: Path, package: str, provider: str) -> list[Need]:
    """Every import of a `provider` module anywhere in `package`'s source, function bodies included (a feature
    imports its kernels when it runs). A `try:` whose handlers catch ImportError is a set of alternatives:
    its body's needs, or one handler's (vLLM tries aiter's new module path, then the old one)."""
    needs: list[Need] = []
    for path in sorted((source_root / package).rglob("*.py")):
        parts = path.relative_to(source_root).with_suffix("").parts
        is_package = path.name == "__init__.py"
        module = ".".join(parts[:-1] if is_package else parts)
        tree = ast.parse(path.read_text(errors="replace"), str(path))
        needs += _needs(tree.body, module, is_package, provider, str(path.relative_to(source_root)))
    return needs


def _needs(statements: list[ast.stmt], module: str, is_package: bool, provider: str, where: str) -> list[Need]:
    found: list[Need] = []
    for node in statements:
        if isinstance(node, ast.Import):
            found += [(a.name, f"{where}:{node.lineno}", False) for a in node.names
                      if a.name.split(".", 1)[0] == provider]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            if base.split(".", 1)[0] == provider:
                found.append((base, f"{where}:{node.lineno}", False))
                found += [(f"{base}.{a.name}", f"{where}:{node.lineno}", True) for a in node.names if a.name != "*"]
        elif isinstance(node, ast.Try) and any(_catches_import_error(h) for h in node.handlers):
            branches = [b for b in [_needs(node.body, module, is_package, provider, where)]
                        + [_needs(h.body, module, is_package, provider, where) for h in node.handlers] if b]
            if len(branches) > 1:  # one branch alone is optional: the handler copes without it
                found.append(tuple(branches))
            found += _needs(node.orelse + node.finalbody, module, is_package, provider, where)
        else:
            bodies = [getattr(node, name, None) for name in ("body", "orelse", "finalbody")]
            bodies += [h.body for h in getattr(node, "handlers", [])] + [c.body for c in getattr(node, "cases", [])]
            for body in bodies:
                if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
                    found += _needs(body, module, is_package, provider, where)
    return found


def unmet_needs(needs: list[Need], exists: Callable[[str], bool]) -> list[str]:
    """The needs whose module does not exist ("module (path:line)"); `from X import a` counts X.a only where it
    is a submodule (a name defined in X cannot be read without running it)."""
    unmet = []
    for need in needs:
        if isinstance(need[0], list):
            branches = [unmet_needs(branch, exists) for branch in need]
            if all(branches):
                unmet.append("none of: " + " | ".join(", ".join(b) for b in branches))
        elif not need[2] and not exists(need[0]):
            unmet.append(f"{need[0]} ({need[1]})")
    return unmet


def module_exists(source_root: Path, alias_maps: tuple[tuple[str, str], ...] = ()) -> Callable[[str], bool]:
    """Whether a module has source under source_root, or is an old name a package's __init__.py maps to a new
    one (alias_maps: (package, name of a dict literal {old: new relative name}), resolved by a finder at run time)."""
    aliases: dict[str, str] = {}
    for package, name in alias_maps:
        path = module_path(source_root, package)
        tree = ast.parse(path.read_text()) if path else ast.Module(body=[], type_ignores=[])
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
                aliases.update({f"{package}.{old}": f"{package}.{new}" for old, new in ast.literal_eval(node.value).items()})
    return lambda module: _is_module(source_root, aliases.get(module, module))
