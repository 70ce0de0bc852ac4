"""Order outputs by dependency; a cycle is an error that names it."""
from __future__ import annotations

from .errors import UserError
from .recipes import Output


def build_order(outputs: list[Output]) -> list[Output]:
    """Topological order, ties broken by name so plans are stable."""
    by_name: dict[str, list[Output]] = {}
    for o in outputs:
        by_name.setdefault(o.name, []).append(o)
    names = sorted(by_name)
    deps = {n: sorted({d for o in by_name[n] for d in o.requires if d in by_name}) for n in names}
    _raise_on_cycle(names, deps)
    ordered: list[str] = []
    placed: set[str] = set()
    while len(ordered) < len(names):
        ready = [n for n in names if n not in placed and all(d in placed for d in deps[n])]
        for n in ready:
            ordered.append(n)
            placed.add(n)
    return [o for n in ordered for o in sorted(by_name[n], key=lambda o: o.build_string)]


def closure(outputs: list[Output], wanted: list[str]) -> list[Output]:
    """The wanted packages and everything they need."""
    by_name: dict[str, list[Output]] = {}
    for o in outputs:
        by_name.setdefault(o.name, []).append(o)
    unknown = [w for w in wanted if w not in by_name]
    if unknown:
        raise UserError(
            f"unknown package {', '.join(unknown)}: choose from {', '.join(sorted(by_name))}"
        )
    keep: set[str] = set()
    stack = list(wanted)
    while stack:
        name = stack.pop()
        if name in keep:
            continue
        keep.add(name)
        stack += [d for o in by_name[name] for d in o.requires if d in by_name]
    return [o for o in outputs if o.name in keep]


def needed_by(outputs: list[Output], targets: list[str]) -> dict[str, str]:
    """Every package the targets need, transitively, each with why it is in: the target itself, or the
    first target that needs it and through which package (breadth first, so the shortest path)."""
    by_name: dict[str, list[Output]] = {}
    for o in outputs:
        by_name.setdefault(o.name, []).append(o)
    closure(outputs, targets)  # names an unknown target
    why: dict[str, str] = {}
    for target in targets:
        if target in why:
            continue
        why[target] = "the default target" if target == targets[0] else "asked for"
        queue = [(target, None)]
        while queue:
            name, via = queue.pop(0)
            for dep in sorted({d for o in by_name[name] for d in o.requires if d in by_name}):
                if dep not in why:
                    hop = via or name
                    why[dep] = f"{target} needs it" + (f" (through {hop})" if hop != target else "")
                    queue.append((dep, dep if name == target else hop))
    return why


def dependents_of(outputs: list[Output], failed: set[str]) -> set[str]:
    """Every package that needs a failed one, directly or not."""
    blocked = set()
    changed = True
    while changed:
        changed = False
        for o in outputs:
            if o.name not in blocked and o.requires & (failed | blocked):
                blocked.add(o.name)
                changed = True
    return blocked - failed


def _raise_on_cycle(names: list[str], deps: dict[str, list[str]]) -> None:
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for dep in deps[node]:
            if state.get(dep) == 1:
                cycle = path[path.index(dep):] + [dep]
                raise UserError(
                    f"dependency cycle: {' -> '.join(cycle)}: remove one of these requirements"
                )
            if dep not in state:
                visit(dep)
        path.pop()
        state[node] = 2

    for name in names:
        if name not in state:
            visit(name)
