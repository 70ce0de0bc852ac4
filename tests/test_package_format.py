"""The package format and compression level every build writes: options.DEFAULT_PACKAGE_FORMAT, overridable
in orchestrate.toml (`package_format`, `compression_threads`), reaches rattler-build and shows in the package
that lands in the channel; a bad value stops with one line."""
from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml

from orchestrate.options import DEFAULT_PACKAGE_FORMAT, PACKAGE_FORMAT


def add_payload_recipe(workspace: Path) -> None:
    """A package holding 3 MB of text: words drawn from a small vocabulary compress very differently at zstd
    level 1 and 19, so the package's size shows which level was used."""
    folder = workspace / "recipes" / "payload"
    folder.mkdir()
    rng = random.Random(7)
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
                  for _ in range(2000)]
    (folder / "payload.txt").write_text(" ".join(rng.choice(vocabulary) for _ in range(500_000)))
    (folder / "recipe.yaml").write_text(yaml.safe_dump({
        "package": {"name": "payload", "version": "1.0"},
        "build": {"noarch": "generic", "script": ["mkdir -p $PREFIX/share/payload",
                                                  "cp $RECIPE_DIR/payload.txt $PREFIX/share/payload/"]},
    }))


def built_size(orchestrate, workspace: Path, config: str) -> tuple[str, int]:
    (workspace / "orchestrate.toml").write_text("source_channels = []\n" + config)
    channel = workspace / f"channel-{abs(hash(config))}"
    result = orchestrate("build", "payload", "--arch", "gfx1151", "-q", "--channel", channel)
    assert result.code == 0, result.out + result.err
    [package] = [p for p in channel.rglob("payload-1.0-*") if p.is_file()]
    return package.name, package.stat().st_size


def test_the_format_and_level_reach_the_built_package(orchestrate, workspace):
    add_payload_recipe(workspace)
    fastest_name, fastest = built_size(orchestrate, workspace, 'package_format = "conda:1"\n')
    default_name, default = built_size(orchestrate, workspace, "")
    smallest_name, smallest = built_size(orchestrate, workspace, 'package_format = "conda:19"\ncompression_threads = 1\n')
    assert fastest_name.endswith(".conda") and default_name.endswith(".conda") and smallest_name.endswith(".conda")
    # level 1 > the default's level (9) > level 19, each by a margin far above a package's metadata
    assert fastest > default * 1.1 and default > smallest * 1.05, (fastest, default, smallest)
    same_name, same_as_default = built_size(orchestrate, workspace, f'package_format = "{DEFAULT_PACKAGE_FORMAT}"\n')
    assert abs(same_as_default - default) < 0.01 * default


@pytest.mark.parametrize("line, named", [
    ('package_format = "zip"', 'package_format = "zip" is not a package format'),
    ('package_format = "conda:23"', 'package_format = "conda:23" is not a package format'),
    ("package_format = 9", 'package_format = 9 is a whole number: write "conda", "conda:<level -7..22>", "tar-bz2" or '
                           '"tar-bz2:<level 1..9>", e.g. package_format = "conda:9"'),
    ("compression_threads = 0", "compression_threads = 0 is not a whole number of 1 or more"),
])
def test_a_bad_value_stops_with_one_line_naming_the_fix(orchestrate, workspace, line, named):
    (workspace / "orchestrate.toml").write_text(f"source_channels = []\n{line}\n")
    result = orchestrate("plan", "--arch", "gfx1151")
    assert result.code == 2
    lines = result.err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "orchestrate.toml" in lines[0], result.err
    assert "Traceback" not in result.out + result.err


def test_every_format_rattler_build_documents_is_accepted_and_nothing_else():
    for good in ("conda", "conda:-7", "conda:0", "conda:9", "conda:22", "tar-bz2", "tar-bz2:1", "tar-bz2:9"):
        assert PACKAGE_FORMAT.match(good), good
    for bad in ("conda:", "conda:23", "conda:-8", "tar-bz2:0", "tar-bz2:10", "tar.bz2", "zstd:9", " conda"):
        assert not PACKAGE_FORMAT.match(bad), bad
