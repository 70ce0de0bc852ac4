"""Sharing the channel with a team: `serve`, `publish`, `consumer-manifest`, and the build cache
(`build-all --cache-channel URL`, see cache.py). The command line adds COMMANDS to its own."""
from __future__ import annotations

import argparse
from pathlib import Path

from ..arch_list import arch_list, arch_names
from ..errors import UserError
from ..key_text import key_file, public_key
from ..options import (CHANNEL_SCHEMES, DEFAULT_CHANNEL, PACKAGE_SERVER_SCHEMES, existing_folder, find_workspace, folder,
                       http_url, load_config, location, options_from_args, port, shared_channel)


install_channel = location(*CHANNEL_SCHEMES)  # where teammates install from: what pixi reads


def publish_target(text: str) -> str:
    """Where publish writes: a folder or a URL of a writable kind (HTTP is read-only: said with its fix)."""
    if text.lower().startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"{text!r} is read-only over HTTP: publish to the folder or bucket behind it "
                                         "(file://, s3://) or to a package server (prefix://, quetz://, …)")
    return location("file", "s3", *PACKAGE_SERVER_SCHEMES)(text)


def _options(args: argparse.Namespace):
    """The CLI's own Options for the arguments these commands share with it (--workspace, --channel)."""
    return options_from_args(args)


def _local_channel_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=existing_folder, metavar="DIR",
                        help="folder with recipes/ and variants/ (default: found from here)")
    parser.add_argument("--channel", type=folder, metavar="DIR",
                        help=f"local channel folder (default: <workspace>/{DEFAULT_CHANNEL})")
    parser.add_argument("--quiet", "-q", action="store_true", help="plain lines only")


def _serve_arguments(parser: argparse.ArgumentParser) -> None:
    from .serve import DEFAULT_HOST, DEFAULT_PORT

    _local_channel_arguments(parser)
    parser.add_argument("--host", default=DEFAULT_HOST,
                        help=f"address to listen on (default {DEFAULT_HOST}: this machine only; 0.0.0.0: the network)")
    parser.add_argument("--port", type=port, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: any free one)")


def _run_serve(args, reporter) -> int:
    from .serve import serve

    return serve(_options(args).channel, args.host, args.port, reporter)


def _trusted_key_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--trusted-key", action="append", default=[], metavar="KEY", type=public_key,
                        help=f"{what} (ssh-ed25519 AAAA…, or a .pub file; repeatable; adds to trusted_keys in "
                             "orchestrate.toml)")


def _trusted(args, config: dict) -> list[str]:
    """The keys this command trusts: orchestrate.toml's trusted_keys and every --trusted-key."""
    return [*config.get("trusted_keys", []), *args.trusted_key]


def _s3_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--s3-endpoint-url", metavar="URL", type=http_url,
                        help="S3-compatible endpoint, e.g. http://minio:9000 (default: [s3-options.<bucket>] in "
                             "orchestrate.toml, else $AWS_ENDPOINT_URL, else AWS)")
    parser.add_argument("--s3-region", help="region (default: orchestrate.toml, $AWS_REGION, else us-east-1)")
    parser.add_argument("--s3-path-style", action=argparse.BooleanOptionalAction, default=None,
                        help="path-style bucket addressing (default: on with a custom endpoint, off for AWS)")


def _s3_flags(args, url: str | None) -> dict:
    """The --s3-* flags, for the channel at `url`; given for another channel (a folder, http://, the local one),
    which they would not reach, they are refused rather than ignored."""
    flags = {"endpoint_url": args.s3_endpoint_url, "region": args.s3_region, "path_style": args.s3_path_style}
    given = [name for name, value in flags.items() if value is not None]
    if given and not (url or "").startswith("s3://"):
        flag = {"endpoint_url": "--s3-endpoint-url", "region": "--s3-region", "path_style": "--[no-]s3-path-style"}
        raise UserError(f"{flag[given[0]]} goes with an s3:// channel, and {url or 'the local channel'} is none: drop it")
    return flags


def _publish_arguments(parser: argparse.ArgumentParser) -> None:
    _local_channel_arguments(parser)
    parser.add_argument("--to", required=True, metavar="TARGET", type=publish_target,
                        help="file:///dir, s3://bucket/channel, prefix://[host/]channel, quetz://host/channel, "
                             "artifactory://host/channel or anaconda://owner[/label]")
    parser.add_argument("--arch", help="publish only this architecture's packages (and the noarch ones)")
    parser.add_argument("--sign-key", metavar="FILE", type=key_file,
                        help="sign each package with this OpenSSH ed25519 private key (default: sign_key in "
                             "orchestrate.toml, else unsigned)")
    _trusted_key_argument(parser, "keep a channel's copy of one of our packages when this key signed it")
    _s3_arguments(parser)
    parser.add_argument("packages", nargs="*", metavar="PKG", help="only these packages (default: all)")


def _run_publish(args, reporter) -> int:
    from .publish import publish

    options = _options(args)
    if args.arch:  # a typo would otherwise publish nothing and exit 0
        from ..architectures import ArchitectureTable

        ArchitectureTable.load(options.variants_dir).get(args.arch)
    options.arch = args.arch  # a filter here, not the build architecture from orchestrate.toml
    return publish(options, args.to, args.packages, reporter, _s3_flags(args, args.to), args.sign_key)


def _consumer_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--channel", required=True, metavar="URL", type=install_channel,
                        help="the shared channel teammates install from (http(s)://, s3://, file://, a path)")
    parser.add_argument("--arch", type=arch_list, metavar="ARCH[,ARCH...]",
                        help="the architectures to write a pixi platform for (default: those the channel serves); "
                             "one pins the GPU-specific packages to its builds")
    parser.add_argument("--one-environment", action="store_true",
                        help="with --arch gfx942,gfx950: pin the GPU-specific packages to that set's builds "
                             "(build-all --one-environment), one environment for a machine with all of them")
    parser.add_argument("--workspace", type=existing_folder, metavar="DIR", help="workspace whose architecture table to use")
    _trusted_key_argument(parser, "the verify-channel task checks that this key signed every package")
    written = parser.add_mutually_exclusive_group()  # --print writes no file: an --output beside it would be ignored
    written.add_argument("--output", "-o", type=Path, default=Path("pixi.toml"), help="file to write (default pixi.toml)")
    written.add_argument("--print", dest="print_only", action="store_true", help="print the snippet instead")
    parser.add_argument("--force", action="store_true", help="replace an --output file an earlier consumer-manifest wrote (never another file)")
    parser.add_argument("--name", metavar="NAME", help="the teammate's workspace name (default: the name of the folder "
                                                       "the manifest is written to, as `pixi init` names it)")


def _run_consumer(args, reporter) -> int:
    from ..architectures import ArchitectureTable
    from .consumer import render_manifest, write_manifest

    try:
        workspace = (args.workspace or find_workspace(Path.cwd())).resolve()
    except UserError:
        if args.workspace:
            raise
        workspace = None  # a teammate without the repository: no table, so no per-arch trimming
    config = load_config(workspace) if workspace else {}
    table = ArchitectureTable.load(workspace / "variants") if workspace else None
    names = arch_names(args.arch or "")
    for name in names if table else []:
        table.get(name)  # a typo is one line naming the table's architectures
    served, served_from = (names, "asked for") if names else served_by(args.channel, config, table)
    arch = names[0] if len(names) == 1 else None
    arch = table.get(arch) if arch and table else arch
    if getattr(args, "one_environment", False):  # the set's builds: multi_gfx942_gfx950 in their build strings
        if table is None:
            raise UserError("--one-environment reads the architecture table: run it in the workspace or pass --workspace")
        from ..arch_set import arch_set
        arch = arch_set(table, names).architecture()
    output = args.output / "pixi.toml" if args.output.is_dir() else args.output
    name = args.name or output.resolve().parent.name or "rocm-stack"
    text = render_manifest(args.channel, arch, config, served, served_from, name=name)
    from .consumer_verify import verify_task_lines

    text += verify_task_lines(args.channel, _trusted(args, config))
    if args.print_only:
        reporter.line(text.rstrip("\n"))
        return 0
    path = write_manifest(text, args.output, args.force)
    reporter.line(f"wrote {path}: next to it, check the channel with `pixi run -e verify verify-channel`, then "
                  "`pixi install`")
    return 0


def served_by(url: str, config: dict, table) -> tuple[list[str], str]:
    """The architectures a channel serves: those its rocm-stack builds require (`__amdgpu_arch ==<ISA>`, read from
    its linux-64/repodata.json), in the table's order; ([], why) where the index cannot be read or names none."""
    from ..detect import gfx_name_from_isa
    from .targets import reader_for
    from .untrusted import read_json

    try:
        index = read_json(reader_for(url, config), "linux-64/repodata.json") or {}
    except (UserError, OSError) as exc:
        return [], f"its index could not be read: {' '.join(str(exc).split())[:200]}"
    records = {**(index.get("packages") or {}), **(index.get("packages.conda") or {})}
    isas = {isa.strip().removeprefix("==") for record in records.values() if isinstance(record, dict)
            and record.get("name") == "rocm-stack" for dep in record.get("depends") or []
            if isinstance(dep, str) and dep.startswith("__amdgpu_arch ==")
            for isa in dep.split(" ", 1)[1].split("|")}  # a build for several GPUs (arch_set): ==9.4.2|==9.5.0
    names = {(table.by_isa(isa).name if table and table.by_isa(isa) else gfx_name_from_isa(isa)) for isa in isas} - {""}
    order = table.names() if table else []
    names = sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))
    return names, "the channel serves (its rocm-stack builds)" if names else "its index holds no rocm-stack build"


def _verify_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--workspace", type=existing_folder, metavar="DIR",
                        help="folder with recipes/ and variants/ (default: found from here)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--channel", type=folder, metavar="DIR",
                        help=f"local channel folder (default: <workspace>/{DEFAULT_CHANNEL})")
    where.add_argument("--from", dest="source", metavar="URL", type=shared_channel,
                       help="a shared channel instead: a folder, file:///dir, s3://bucket/channel or http(s)://")
    parser.add_argument("--quick", action="store_true",
                        help="compare sizes only: no sha256, so nothing is downloaded from a remote channel")
    parser.add_argument("--json", action="store_true", help="write the result as one JSON object, for scripts")
    _trusted_key_argument(parser, "name every package this key did not sign, as it is")
    parser.add_argument("--quiet", "-q", action="store_true", help="problems and the verdict only")
    _s3_arguments(parser)


def _verify_target(args):
    """The store `verify` checks, and whether it is the local channel."""
    from .store import FolderStore
    from .targets import PackageServer, parse_target

    if args.source:
        try:
            workspace = (args.workspace or find_workspace(Path.cwd())).resolve()
        except UserError:
            if args.workspace:
                raise
            workspace = None  # checking a team channel needs no workspace
        target = parse_target(args.source, load_config(workspace) if workspace else {}, **_s3_flags(args, args.source))
        return (target.reader() if isinstance(target, PackageServer) else target), False
    _s3_flags(args, None)
    try:
        default = _options(argparse.Namespace(**{**vars(args), "channel": None})).channel
    except UserError:  # --channel DIR outside any workspace
        if not args.channel:
            raise
        default = None
    path = args.channel.resolve() if args.channel else default
    if not path.is_dir():
        raise UserError(f"channel {path} does not exist: pass --channel DIR with a channel, or --from URL")
    return FolderStore(path), True, (f" --channel {path}" if path != default else "")


def _run_verify(args, reporter) -> int:
    from .verify import run

    return run(args, reporter, lambda: _verify_target(args))


# (name, help, add_arguments, run) for each command
COMMANDS = [
    ("serve", "serve the local channel over HTTP (loopback unless --host says otherwise)", _serve_arguments, _run_serve),
    ("publish", "upload the channel's packages to a shared channel, then index it", _publish_arguments, _run_publish),
    ("consumer-manifest", "write a pixi.toml that installs the stack from a shared channel", _consumer_arguments,
     _run_consumer),
    ("verify", "check that a channel holds every file its index and build-cache lookup list, whole",
     _verify_arguments, _run_verify),
]
