"""`orchestrate consumer-manifest`: a pixi.toml for teammates who install, not build."""
from __future__ import annotations

import json
import urllib.parse
from pathlib import Path

from ..architectures import Architecture, override_hint
from ..errors import UserError
from ..web import TOKEN_PATH
from .targets import S3Store, parse_target

# The stack a teammate installs: (package, GPU-specific?). rocm-stack pulls in PyTorch, vLLM, flash-attn (the
# architecture's default backend, where it has one) and the check tool for the machine's GPU and refuses other
# GPUs. pytorch-rocm (a metapackage: `pytorch * *rocm*`) says "the ROCm build of PyTorch", so a conda-forge package
# that needs `pytorch` gets ours; `pytorch` itself is named for the architecture pin.
STACK = (("rocm-stack", True), ("pytorch-rocm", False), ("pytorch", True), ("vllm", True),
         ("rocm-stack-check", False))
FLASH_ATTN = "flash-attn"
# The line that marks a manifest as ours: only such a file is ever replaced (a project's own pixi.toml never is).
WRITTEN_BY = "# Written by `orchestrate consumer-manifest`"
# The first pixi whose rich platforms take `amdgpu = "gfx…"`: 0.82.0, 2026-10-13 (prefix-dev/pixi#7144 and its
# release page; shared/reference/landscape-2026-12.md). Every manifest we write, and our own pixi.toml, requires it;
# docs/sharing.md states it (tests/test_multi_gpu.py keeps the three in step).
PIXI_MIN_VERSION = "0.82.0"
REQUIRES_PIXI = f">={PIXI_MIN_VERSION}"


def platform_line(gfx: str) -> str:
    """One pixi rich platform for a GPU architecture: its solve sees that GPU (`__amdgpu`, `__amdgpu_arch`),
    whether or not the machine that locks has it."""
    return f'  {{ name = "{gfx}", platform = "linux-64", amdgpu = "{gfx}" }},'


# A channel URL may carry its credentials (anaconda.org's and quetz's /t/<token>/, or user:password@). A pixi.toml
# is committed and shared, so the manifest writes the URL without them, names the login that supplies them (rattler
# puts a conda token back into the path as /t/<token>/ itself), and its verify task reads them from these variables.
TOKEN_VARIABLE = "ROCM_STACK_CHANNEL_TOKEN"
USERINFO_VARIABLE = "ROCM_STACK_CHANNEL_USERINFO"


def channel_for_pixi(url: str) -> str:
    """pixi wants an absolute location for a folder channel; URLs pass through, without their credentials."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme in ("", "file"):
        path = Path(urllib.parse.unquote(parts.path) if url.startswith("file:") else url)
        return path.expanduser().resolve().as_uri()
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urllib.parse.urlunsplit((parts.scheme, netloc, TOKEN_PATH.sub("", parts.path, count=1), parts.query,
                                    parts.fragment)).rstrip("/")


def credentials_in(url: str) -> str:
    """Which credentials a channel URL carries: "conda-token" (/t/<token>/), "userinfo" (user:password@) or ""."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return ""
    return "conda-token" if TOKEN_PATH.search(parts.path) else "userinfo" if "@" in parts.netloc else ""


def channel_with_variables(url: str) -> str:
    """The channel URL with its credentials as shell variables (a pixi task expands them), for the verify task."""
    parts = urllib.parse.urlsplit(url)
    kind = credentials_in(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    if kind == "userinfo":
        netloc = f"${USERINFO_VARIABLE}@{netloc}"
    path = TOKEN_PATH.sub(f"/t/${TOKEN_VARIABLE}", parts.path, count=1) if kind == "conda-token" else parts.path
    return urllib.parse.urlunsplit((parts.scheme, netloc, path, parts.query, parts.fragment)).rstrip("/")


def render_manifest(channel_url: str, arch: Architecture | str | None, config: dict,
                    served: list[str] | None = None, served_from: str = "", name: str = "rocm-stack") -> str:
    """`arch`: the one architecture the GPU-specific packages are pinned to (--arch A), or None; `served`: the
    architectures the channel serves (one rich platform each), and where that list comes from; `name`: the
    teammate's workspace name."""
    channel = channel_for_pixi(channel_url)
    arch_name = arch.name if isinstance(arch, Architecture) else arch
    served = served if served is not None else [arch_name] if arch_name else []
    isa = arch.isa.split("|")[0] if isinstance(arch, Architecture) else None  # a set's (9.4.2|9.5.0): its first GPU's
    lines = [
        f"# Installs the ROCm ML stack from {channel}; everything else comes from conda-forge.",
        f"{WRITTEN_BY}; run `pixi install`, then `pixi run rocm-stack-check check`.",
        "#",
        "# Which GPU build you get: every GPU-specific package in the channel has one build per GPU architecture,",
        "# each constrained to `__amdgpu_arch ==<ISA version>` (gfx1151 -> 11.5.1, gfx942 -> 9.4.2); rocm-stack",
        "# requires it, so a machine whose GPU has no build in the channel gets a clear 'cannot solve'.",
        "# The solver detects this machine's AMD GPU as the virtual package __amdgpu_arch and picks the matching",
        "# build, so the same file installs the right builds on every teammate's machine.",
        "# No GPU here (a container build, CI, a login node), or solving for another machine? Say there is an AMD",
        "# GPU and name it as an ISA version (not a gfx name); the ISA alone is dropped where no GPU is seen:",
        f"#   {override_hint(isa or '11.5.1')} pixi install",
    ]
    if arch_name:
        lines += [
            f"# This file is pinned to {arch_name}: the build strings below only match {arch_name} builds.",
        ]
    lines += [
        "",
        "[workspace]",
        f"name = {json.dumps(name)}",
        f'channels = ["{channel}", "conda-forge"]',
    ]
    lines += platform_lines(served, served_from)
    target = parse_target(channel_url, config) if channel.startswith("s3://") else None
    lines[2:2] = credentials_lines(channel, target, credentials_in(channel_url))
    if isinstance(target, S3Store) and target.options.endpoint_url:
        lines += [
            "",
            f"[workspace.s3-options.{target.bucket}]",
            f'endpoint-url = "{target.options.endpoint_url}"',
            f'region = "{target.options.region}"',
            f"force-path-style = {'true' if target.options.path_style else 'false'}",
        ]
    lines += ["", "[dependencies]"]
    for package, gpu_specific in STACK:
        lines.append(f'{package} = {{ version = "*", build = "*{arch_name}*" }}' if gpu_specific and arch_name
                     else f'{package} = "*"')
    lines += flash_attn_lines(arch if isinstance(arch, Architecture) else None)
    return "\n".join(lines) + "\n"


def platform_lines(served: list[str], served_from: str) -> list[str]:
    """One named rich platform per architecture served, and the pixi that reads them; where none is known, the plain
    platform (the solver then sees this machine's GPU)."""
    if not served:
        return ["# The channel's GPU architectures are not known here: " + (served_from or "no --arch") + ".",
                "# Pass --arch gfx1151[,gfx1100...] for one pixi platform per GPU, locked on any machine.",
                'platforms = ["linux-64"]']
    return ["# One platform per GPU architecture " + (served_from or "asked for") + ": `pixi lock` solves each",
            "# (no GPU needed: the platform declares it), `pixi install` on a machine installs its GPU's.",
            "platforms = [", *map(platform_line, served), "]",
            f'requires-pixi = "{REQUIRES_PIXI}"']
def credentials_lines(channel: str, target, carried: str = "") -> list[str]:
    """The step before `pixi install` where the channel needs credentials: pixi reads them from its auth store
    (`pixi auth login`) or, for S3 without s3-options, from AWS's own chain; none for a folder or loopback.
    `carried`: the credentials the URL given to consumer-manifest held (credentials_in), never written here."""
    if isinstance(target, S3Store) and target.options.endpoint_url:
        return ["# Credentials first (this S3-compatible store is read with the s3-options below, so pixi takes its",
                "# keys from its auth store, not from AWS_* variables):",
                f"#   pixi auth login s3://{target.bucket} --s3-access-key-id KEY_ID --s3-secret-access-key SECRET"]
    if isinstance(target, S3Store):
        return ["# Credentials first: pixi reads AWS's own, as the aws CLI does (AWS_ACCESS_KEY_ID and",
                "# AWS_SECRET_ACCESS_KEY, or AWS_PROFILE with ~/.aws/config)."]
    parts = urllib.parse.urlsplit(channel)
    if carried == "conda-token":
        return ["# The channel URL you were given carries a token (/t/<token>/): it is not written in this shared file.",
                "# Log in once before `pixi install` (pixi puts the token back into the URL as /t/<token>/):",
                f"#   pixi auth login {parts.netloc} --conda-token TOKEN"]
    if carried == "userinfo":
        return ["# The channel URL you were given carries a user and password: they are not written in this shared file.",
                "# Log in once before `pixi install`:",
                f"#   pixi auth login {parts.netloc} --username USER --password PASSWORD"]
    if parts.scheme in ("http", "https") and parts.hostname not in ("localhost", "127.0.0.1", "::1"):
        return ["# Where the server asks for credentials, log in once before `pixi install` (stored for every project):",
                f"#   pixi auth login {parts.netloc} --token TOKEN   (prefix.dev; --conda-token for quetz and",
                "#   anaconda.org; --username U --password P for Artifactory and other basic-auth servers)"]
    return []


def flash_attn_lines(arch: Architecture | None) -> list[str]:
    """flash-attn comes with rocm-stack (the default backend); the other backend, built on request, is offered
    as a commented-out pin."""
    if arch and not arch.flash_attn_backends:
        return [f"# {FLASH_ATTN}: not built for {arch.name} (no flash-attn backend supports it)"]
    others = [b for b in arch.flash_attn_backends if b != arch.flash_attn_default] if arch else ["ck"]
    lines = [f"# {FLASH_ATTN} comes with rocm-stack" + (f" ({arch.flash_attn_default} backend on {arch.name})" if arch else "")]
    for backend in others:
        lines += [f"# the {backend} backend instead, once the channel has it (`orchestrate build {FLASH_ATTN} "
                  f"--variant flash_attn_backend={backend}` builds it):",
                  f'# {FLASH_ATTN} = {{ version = "*", build = "*{arch.name if arch else ""}_{backend}_*" }}']
    return lines


def write_manifest(text: str, output: Path, force: bool) -> Path:
    if output.is_dir():
        output = output / "pixi.toml"
    if output.exists() and not written_by_us(output):
        raise UserError(f"{output} exists and was not written by `orchestrate consumer-manifest`, so it is never "
                        "replaced: write the manifest elsewhere with --output DIR/pixi.toml, or paste the snippet "
                        "from --print")
    if output.exists() and not force:
        raise UserError(f"{output} exists (an earlier consumer-manifest): pass --force to replace it, or --output "
                        "to write another file")
    if not output.parent.is_dir():
        raise UserError(f"folder {output.parent} does not exist: create it or pass another --output")
    output.write_text(text)
    return output


def written_by_us(path: Path) -> bool:
    try:
        head = path.read_text(errors="replace").splitlines()[:5]
    except OSError:
        return False
    return any(line.startswith(WRITTEN_BY) for line in head)
