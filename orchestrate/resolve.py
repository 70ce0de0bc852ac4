"""Every requirement of a plan, resolved before anything is built (issue 14.2).

rattler-build solves a package's environments only when it builds that package: a requirement that no
channel has used to surface hours into `build-all`, at the last package, as "the recipe's tests failed".
Here every build, host, run and test environment of every package the plan will build is solved up
front, in one pass, with py-rattler (the solver rattler-build and pixi share), against the channels the
builds will use: the plan's own packages first, then the local channel, then the source channels, with
strict channel priority as rattler-build solves.

The plan's own packages do not exist yet, so they are written as records (name, version, build string,
run requirements, run constraints) into a throw-away channel folder that is put first. Run and test
environments are solved as on a machine with the plan's GPU (`__amdgpu_arch` = its ISA); build and host
environments without any `__amdgpu` virtual package, as rattler-build (which does not know it) solves
them. Not modelled: run_exports that host packages add to run requirements when the package is built.
"""
from __future__ import annotations

import asyncio
import datetime
import json
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import graph, runner
from .channel import Channel
from .channels import FIX_CHANNEL, as_rattler, base_url, channel_problem, display_names
from .errors import UserError
from .options import Options
from .recipes import Output
from .ui import Reporter

PLATFORM, NOARCH = "linux-64", "noarch"
QUERY_TIMEOUT_S = 300  # conda-forge's repodata for a few hundred names, on a slow link
SOLVE_TIMEOUT_S = 60
PLAN_CHANNEL = "this plan's packages"
FIX_MISSING = "add a channel that has it to source_channels in orchestrate.toml, or fix the requirement"


@dataclass(frozen=True)
class Environment:
    """One environment rattler-build will solve for `package`: kind is build, host, run or test."""

    package: Output
    kind: str
    specs: tuple[str, ...]  # what is solved
    requirements: tuple[str, ...]  # the package's own requirements among them: each must be in a channel

    @property
    def on_gpu(self) -> bool:
        """Run and test environments are what a user installs: on a machine with the plan's GPU."""
        return self.kind in ("run", "test")


@dataclass
class Resolution:
    """Packages of the plan that cannot be completed, each with its one-line reasons."""

    problems: dict[str, list[str]] = field(default_factory=dict)
    blocked: dict[str, list[str]] = field(default_factory=dict)  # dependents: name -> the packages they need

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        return [line for lines in self.problems.values() for line in lines]

    def reasons(self) -> dict[str, str]:
        """Why each package that cannot be completed cannot be, for the plan's summary."""
        reasons = {name: "; ".join(lines) for name, lines in self.problems.items()}
        for name, needs in self.blocked.items():
            reasons[name] = f"needs {', '.join(needs)}, whose requirements cannot be resolved"
        return reasons


def check_plan(plan: runner.Plan, options: Options) -> Resolution:
    """Solve every environment of every package `plan` will build; an unreachable channel is a UserError
    (one line: nothing else can be decided without it)."""
    building = [s.output for s in plan.steps if s.state == runner.BUILD]
    if not building:
        return Resolution()
    ours = [s.output for s in plan.steps if s.state != runner.SKIP]
    local = Channel(options.channel)
    users = ([str(local.path)] if local.is_channel() else []) + list(options.source_channels)
    with tempfile.TemporaryDirectory(prefix="orchestrate-plan-channel-") as scratch:
        write_plan_channel(ours, Path(scratch))
        return asyncio.run(_check(environments(building), plan, Path(scratch), users,
                                  plan.arch.isa.split("|")[0]))  # a set's: as on its first member's GPU


def require_resolvable(plan: runner.Plan, options: Options, reporter: Reporter) -> dict[str, str]:
    """Before the first build: when the plan cannot be completed, stop with nothing built (exit 2); with
    --keep-going, say what cannot be completed, mark it (and what needs it) blocked, and build the rest.
    Returns the blocked packages with their reasons (for a plan made again later)."""
    resolution = check_plan(plan, options)
    if resolution.ok:
        return {}
    lines = resolution.lines()
    cannot = sorted(resolution.problems) + sorted(set(resolution.blocked) - set(resolution.problems))
    if options.keep_going:
        for line in lines:
            reporter.error(f"error: {line}")
        reporter.error(f"--keep-going: {', '.join(cannot)} cannot be completed and will not be built; building the rest")
        runner.block(plan, resolution.reasons())
        return resolution.reasons()
    if len(lines) == 1:
        raise UserError(f"{lines[0]}; nothing was built ({_keep_going_hint(cannot)})")
    for line in lines:
        reporter.error(f"error: {line}")
    raise UserError(f"nothing was built: {', '.join(cannot)} cannot be completed because of the {len(lines)} "
                    f"requirement problem(s) above ({_keep_going_hint(cannot)})")


def _keep_going_hint(cannot: list[str]) -> str:
    return f"--keep-going builds everything but {', '.join(cannot)}"


def environments(outputs: Sequence[Output]) -> list[Environment]:
    """The build, host, run and test environments rattler-build solves for each output."""
    found: list[Environment] = []
    for output in outputs:
        requirements = output.rendered.get("requirements") or {}
        itself = exact_spec(output)
        for kind in ("build", "host"):
            specs = tuple(variant_pinned(requirement_spec(s), output.variant) for s in requirements.get(kind) or [])
            if specs:
                found.append(Environment(output, kind, specs, specs))
        run = tuple(requirement_spec(s) for s in requirements.get("run") or [])
        found.append(Environment(output, "run", (itself,), run))
        for test in output.rendered.get("tests") or []:
            for kind, specs in _test_environments(test):
                if kind == "run" and not specs:
                    continue  # the package alone: the run environment above
                solved = ((itself,) if kind == "run" else ()) + tuple(specs)
                found.append(Environment(output, "test", solved, tuple(specs)))
    return found


def write_plan_channel(outputs: Sequence[Output], folder: Path) -> None:
    """A channel folder with a repodata record per output: what the plan will add, before it is built."""
    subdirs: dict[str, dict] = {PLATFORM: {}, NOARCH: {}}
    for output in outputs:
        subdir = NOARCH if output.noarch else PLATFORM
        requirements = output.rendered.get("requirements") or {}
        record: dict[str, Any] = {
            "name": output.name,
            "version": output.version,
            "build": output.build_string,
            "build_number": int((output.rendered.get("build") or {}).get("number") or 0),
            "depends": [requirement_spec(s) for s in requirements.get("run") or []],
            "constrains": [requirement_spec(s) for s in requirements.get("run_constraints") or []],
            "subdir": subdir,
        }
        noarch = (output.rendered.get("build") or {}).get("noarch")
        if noarch:
            record["noarch"] = str(noarch)
        subdirs[subdir][f"{output.name}-{output.version}-{output.build_string}.conda"] = record
    for subdir, records in subdirs.items():
        (folder / subdir).mkdir(parents=True, exist_ok=True)
        repodata = {"info": {"subdir": subdir}, "packages": {}, "packages.conda": records, "repodata_version": 1}
        (folder / subdir / "repodata.json").write_text(json.dumps(repodata))


def requirement_spec(spec: Any) -> str:
    """A rendered requirement as a match spec: `{pin_subpackage: …}` and `{pin_compatible: …}` (rendered
    into bounds only when the package is built) stand for their package, any version."""
    if isinstance(spec, dict):
        for key in ("pin_subpackage", "pin_compatible"):
            if key in spec:
                inner = spec[key]
                return str(inner.get("name") if isinstance(inner, dict) else inner)
        raise UserError(f"requirement {spec!r} is neither a match spec nor a pin: fix the recipe")
    return " ".join(str(spec).split())


def variant_pinned(spec: str, variant: dict[str, str]) -> str:
    """rattler-build pins a bare build or host requirement named like a variant key (`python` with
    `python: 3.12`) to that key's value."""
    name = spec.strip()
    value = str(variant.get(name) or "")
    if not value or " " in name:
        return spec
    words = value.split()
    if len(words) == 2 and words[0][:1].isdigit():  # an exact pin_subpackage: the output's `version build`
        return f"{name} =={words[0]} {words[1]}"
    return f"{name} {value}" if any(c in value for c in " *<>=!,") else f"{name} {value}.*"


def exact_spec(output: Output) -> str:
    return f"{output.name} =={output.version} {output.build_string}"


def _test_environments(test: dict) -> list[tuple[str, list[str]]]:
    """(kind, specs) of what one rendered test installs: 'run' beside the package, 'build' on its own."""
    if not isinstance(test, dict):
        return []
    if "python" in test:
        python = test["python"] or {}
        return [("run", ["python"] + (["pip"] if python.get("pip_check", True) else []))]
    if "downstream" in test:
        return [("run", [str(test["downstream"])])]
    if "script" in test:
        requirements = test.get("requirements") or {}
        found = [("run", [requirement_spec(s) for s in requirements.get("run") or []])]
        if requirements.get("build"):
            found.append(("build", [requirement_spec(s) for s in requirements["build"]]))
        return found
    return []  # package_contents and the like install nothing


async def _check(envs: list[Environment], plan: runner.Plan, scratch: Path, users: list[str], isa: str) -> Resolution:
    import rattler

    names = display_names(users)
    sources = [as_rattler(c) for c in [str(scratch)] + users]
    searched = ", ".join([PLAN_CHANNEL] + users)
    gateway = rattler.Gateway()  # one for every solve: each channel's repodata is fetched once
    wanted = sorted({_name(s) for env in envs for s in env.specs + env.requirements} - {""})
    try:
        found = await asyncio.wait_for(
            gateway.query(sources, [PLATFORM, NOARCH], [n for n in wanted if not n.startswith("__")], recursive=False),
            QUERY_TIMEOUT_S)
    except asyncio.TimeoutError:
        raise UserError(f"the channels ({', '.join(users)}) did not answer within {QUERY_TIMEOUT_S} s: {FIX_CHANNEL}")
    except Exception as exc:  # GatewayError: a channel that cannot be reached or is no channel
        raise UserError(channel_problem(str(exc), names) or f"the channels could not be read ({_first(exc)})")
    by_channel = _records_by_channel(found, [str(scratch)] + users)

    result = Resolution()
    for env in envs:
        for spec in env.requirements:
            problem = _missing(spec, by_channel, names, searched)
            if problem:
                _add(result.problems, env.package.name, f"{spec} ({env.kind} requirement of {env.package.name}) "
                     f"{problem} in {_recipe(env.package)}")

    detected = _virtual_packages()
    without_gpu = [v for v in detected if not v.name.normalized.startswith("__amdgpu")]
    with_gpu = without_gpu + _gpu_virtual_packages(isa)
    outputs = list(plan.outputs)
    to_solve = [e for e in envs if e.package.name not in result.problems]

    async def solve(env: Environment) -> str | None:
        try:
            await rattler.solve(sources=sources, specs=list(env.specs), gateway=gateway,
                                platforms=[PLATFORM, NOARCH], virtual_packages=with_gpu if env.on_gpu else without_gpu,
                                channel_priority=rattler.ChannelPriority.Strict,
                                timeout=datetime.timedelta(seconds=SOLVE_TIMEOUT_S))
        except Exception as exc:  # SolverError, GatewayError: the text says which
            return str(exc)
        return None

    errors = await asyncio.gather(*(solve(e) for e in to_solve))
    for env, error in zip(to_solve, errors):  # plan order: a dependency's failure is reported before its dependents
        if error is None:
            continue
        channel = channel_problem(error, names)
        if channel:
            raise UserError(channel)
        if env.package.name in result.problems or env.package.name in graph.dependents_of(outputs, set(result.problems)):
            continue  # one reason per package; one that needs a package that cannot be completed fails with it
        flat = " ".join(error.replace("Cannot solve the request because of:", "").split())
        _add(result.problems, env.package.name,
             f"the {env.kind} environment of {env.package.name} cannot be solved: {flat[:300]}: "
             f"fix the requirements in {_recipe(env.package)}")

    building = {env.package.name for env in envs}
    blocked = graph.dependents_of(outputs, set(result.problems)) & building
    for output in outputs:
        if output.name in blocked and output.name not in result.blocked:
            needs = sorted(_needed_problems(output, outputs, set(result.problems)))
            result.blocked[output.name] = needs
    return result


def _missing(spec: str, by_channel: list[tuple[str, dict]], names: dict[str, str], searched: str) -> str | None:
    """Why no channel provides `spec`, or None when one does (strict priority: the first channel that has
    the name is the only one asked for it)."""
    from rattler import MatchSpec

    name = _name(spec)
    if not name or name.startswith("__"):
        return None  # virtual packages are the machine's, not a channel's
    for channel, records in by_channel:
        candidates = records.get(name)
        if not candidates:
            continue
        if any(MatchSpec(spec).matches(r) for r in candidates):
            return None
        versions = ", ".join(sorted({str(r.version) for r in candidates})[:5])
        where = PLAN_CHANNEL if channel == by_channel[0][0] else names.get(channel, channel)
        return (f"matches none of the {name} packages in {where} ({versions}; strict channel priority takes "
                f"{name} from the first channel that has it): fix the requirement")
    return f"is in none of the channels ({searched}): {FIX_MISSING}"


def _records_by_channel(found, channels: list[str]) -> list[tuple[str, dict]]:
    """[(channel base URL, {name: records})] in priority order."""
    ordered = [(base_url(c), {}) for c in channels]
    index = {url: table for url, table in ordered}
    for records in found:
        for record in records:
            url = str(record.channel or "").rstrip("/")
            table = index.get(url)
            if table is None:  # a record whose channel URL is spelled differently: match by prefix
                table = next((t for u, t in ordered if str(record.url).startswith(u + "/")), None)
            if table is not None:
                table.setdefault(record.name.normalized, []).append(record)
    return ordered


def _needed_problems(output: Output, outputs: list[Output], problems: set[str]) -> set[str]:
    """The packages that cannot be completed which `output` needs, directly or through others."""
    by_name = {o.name: o for o in outputs}
    seen, stack, hit = set(), list(output.requires), set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in problems:
            hit.add(name)
        elif name in by_name:
            stack += list(by_name[name].requires)
    return hit


def _virtual_packages():
    from rattler import VirtualPackage, VirtualPackageOverrides

    return [v.into_generic() for v in VirtualPackage.detect(VirtualPackageOverrides.from_env())]


def _gpu_virtual_packages(isa: str):
    """What rattler detects on a machine with an AMD GPU of this ISA (CONDA_OVERRIDE_AMDGPU_ARCH's form)."""
    from rattler import BuildString, GenericVirtualPackage, PackageName, Version

    return [GenericVirtualPackage(PackageName("__amdgpu"), Version("0"), BuildString("0")),
            GenericVirtualPackage(PackageName("__amdgpu_arch"), Version(isa), BuildString("0"))]


def _name(spec: str) -> str:
    from rattler import MatchSpec

    try:
        name = MatchSpec(spec).name
    except Exception:  # an invalid spec: the solve names it
        return ""
    return name.normalized if name else ""


def _recipe(output: Output) -> str:
    return f"recipes/{output.recipe_name}/recipe.yaml"


def _add(table: dict[str, list[str]], key: str, line: str) -> None:
    if line not in table.setdefault(key, []):
        table[key].append(line)


def _first(exc: Exception) -> str:
    return " ".join(str(exc).split())[:300]
