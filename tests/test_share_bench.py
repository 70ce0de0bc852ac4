"""Benchmark results travel with their packages into a shared channel, `verify` checks them, and the channel
has a page at its root that `serve` answers `/` with (issue 26; the page's content is test_channel_page's job).

Two machines (workspaces) build the test graph for gfx1151 and gfx942 with the recipe tests on; the test
graph's pytorch recipe prints a recorded quick benchmark as the marked line, as the real recipe's
`rocm-stack-check bench --quick --log-json` does on a GPU: the real H100 run for gfx1151, a copy edited to
be slower (a regression) for gfx942. Both publish to one folder on this machine; nothing else is contacted.
"""
from __future__ import annotations

import json
import shutil
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from orchestrate.share.bench import bench_path, record_path
from orchestrate.share.channel_page import PAGE_FILES, write_published_page
from orchestrate.share.lookup import read_index
from orchestrate.share.store import FolderStore
from page_helpers import H100_BENCH, slower_copy
from share_helpers import REPO, free_port, make_workspace, orchestrate, running

pytestmark = pytest.mark.timeout(240)


def recorded_for(arch: str) -> dict:
    document = json.loads(H100_BENCH.read_text())
    document["expect_arch"] = arch
    return document


def slower(document: dict) -> dict:
    """The same run with the fused backends slower (page_helpers.slower_copy), measured later."""
    return {**slower_copy(document), "created": "2026-11-25T14:00:00+00:00"}


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """{arch: (workspace, local channel, the document its pytorch test printed)} and the shared folder."""
    root = tmp_path_factory.mktemp("bench")
    shared = root / "team"
    machines = {}
    for arch, document in (("gfx1151", recorded_for("gfx1151")), ("gfx942", slower(recorded_for("gfx942")))):
        workspace = make_workspace(root / arch)
        (workspace / "recipes" / "pytorch-rocm" / "recorded-bench.json").write_text(json.dumps(document))
        channel = root / arch / "channel"
        built = orchestrate("build-all", "--workspace", str(workspace), "--channel", str(channel), "--arch", arch,
                            "-q", timeout=200)
        assert built.returncode == 0, built.stderr
        published = orchestrate("publish", "--workspace", str(workspace), "--channel", str(channel), "--to",
                                shared.as_uri())
        assert published.returncode == 0, published.stderr
        machines[arch] = (workspace, channel, document)
    return machines, shared


def pytorch_file(channel: Path) -> str:
    return "linux-64/" + next(channel.glob("linux-64/pytorch-*.conda")).name


def test_each_machines_benchmark_is_in_the_channel_beside_its_package_and_verify_passes(team):
    machines, shared = team
    listed, _ = read_index(FolderStore(shared))
    for arch, (_, channel, document) in machines.items():
        file = pytorch_file(channel)
        kept = json.loads((shared / bench_path(arch, file)).read_text())
        assert {k: v for k, v in kept.items() if k not in ("package", "subdir", "build", "build_log")} == document
        assert (kept["subdir"] + "/" + kept["package"]) == file and file in listed
        assert kept["build"] == listed[file]["build"]
        # the machine's own channel keeps the same file, and its page
        assert (channel / bench_path(arch, file)).read_bytes() == (shared / bench_path(arch, file)).read_bytes()
        assert arch in (channel / "index.html").read_text()
    assert sorted(p.parent.name for p in (shared / "bench").glob("*/*.json")) == ["gfx1151", "gfx942"]
    verified = orchestrate("verify", "--from", shared.as_uri())
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "(and 2 benchmark result(s)); every file is there" in verified.stdout


def test_the_channel_root_has_a_page_and_its_data_naming_both_architectures(team):
    machines, shared = team
    page, data = ((shared / name).read_text() for name in ("index.html", "channel-page.json"))
    json.loads(data)
    for arch in machines:
        assert arch in page and arch in data
    for record in read_index(FolderStore(shared))[0].values():  # every package, by its build
        assert record["build"] in data, f"channel-page.json does not name {record['name']} {record['build']}"
    assert not list(shared.glob(".*.incoming")), "a page write left a staged copy behind"


def test_verify_names_a_missing_and_a_damaged_bench_file_and_publish_puts_them_back(team, tmp_path):
    machines, shared = team
    broken = tmp_path / "team"
    shutil.copytree(shared, broken)
    (gfx1151_ws, gfx1151_channel, _), (gfx942_ws, gfx942_channel, _) = machines["gfx1151"], machines["gfx942"]
    missing = bench_path("gfx1151", pytorch_file(gfx1151_channel))
    damaged = bench_path("gfx942", pytorch_file(gfx942_channel))
    (broken / missing).unlink()
    (broken / damaged).write_text((broken / damaged).read_text()[:-40])  # cut short, as a failed copy leaves it
    verified = orchestrate("verify", "--from", broken.as_uri())
    assert verified.returncode == 1
    lines = verified.stdout.strip().splitlines()
    assert len(lines) == 2, verified.stdout
    line_missing = next(line for line in lines if line.startswith(missing))
    line_damaged = next(line for line in lines if line.startswith(damaged))
    assert "is not there" in line_missing and record_path("gfx1151", pytorch_file(gfx1151_channel)) in line_missing
    assert "size" in line_damaged
    assert all(f"orchestrate publish --to {broken.as_uri()}" in line for line in lines)
    for workspace, channel in ((gfx1151_ws, gfx1151_channel), (gfx942_ws, gfx942_channel)):
        again = orchestrate("publish", "--workspace", str(workspace), "--channel", str(channel), "--to",
                            broken.as_uri())
        assert again.returncode == 0, again.stderr
    assert (broken / missing).read_bytes() == (shared / missing).read_bytes()
    assert (broken / damaged).read_bytes() == (shared / damaged).read_bytes()
    assert orchestrate("verify", "--from", broken.as_uri()).returncode == 0


def test_verify_of_the_local_channel_names_a_damaged_bench_file(team, tmp_path):
    machines, _ = team
    workspace, channel, _ = machines["gfx942"]
    local = tmp_path / "channel"
    shutil.copytree(channel, local)
    bench = bench_path("gfx942", pytorch_file(channel))
    text = (local / bench).read_text()
    (local / bench).write_text(text.replace('"expect_arch": "gfx942"', '"expect_arch": "gfx9xx"'))  # same size
    verified = orchestrate("verify", "--workspace", str(workspace), "--channel", str(local))
    assert verified.returncode == 1
    [line] = verified.stdout.strip().splitlines()
    assert line.startswith(bench) and "sha256" in line and "remove" in line


def test_serve_answers_root_with_the_channels_page_and_still_hides_dotfiles(team):
    machines, _ = team
    _, channel, _ = machines["gfx1151"]
    port = free_port()
    command = [sys.executable, "-m", "orchestrate", "serve", "--channel", str(channel), "--port", str(port)]
    with running(command, port):
        answer = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5)
        assert answer.headers["Content-Type"].startswith("text/html")
        assert answer.read() == (channel / "index.html").read_bytes()
        data = urllib.request.urlopen(f"http://127.0.0.1:{port}/channel-page.json", timeout=5).read()
        assert data == (channel / "channel-page.json").read_bytes()
        for hidden in (".orchestrate.lock", "bench/"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/{hidden}", timeout=5)
            assert refused.value.code == 404


def test_a_page_that_cannot_be_made_is_one_warning_and_the_channel_is_untouched(team, tmp_path, monkeypatch):
    import orchestrate.share.page as page

    _, shared = team
    channel = tmp_path / "team"
    shutil.copytree(shared, channel)
    before = {p: p.read_bytes() for p in channel.rglob("*") if p.is_file()}

    def broken(*args, **kwargs):
        raise RuntimeError("the page builder broke")

    monkeypatch.setattr(page, "build_page", broken)
    warnings = []
    store = FolderStore(channel)
    with store.exclusive("test", warnings.append):
        written = write_published_page(store, REPO / "variants", {}, warnings.append)
    assert written is False
    [warning] = warnings
    assert "the page builder broke" in warning and "orchestrate page" in warning
    assert {p: p.read_bytes() for p in channel.rglob("*") if p.is_file()} == before
    assert all((channel / name).is_file() for name in PAGE_FILES)


def test_a_publish_with_nothing_new_writes_the_page_of_a_channel_that_has_none(team, tmp_path):
    machines, shared = team
    older = tmp_path / "team"  # as a channel published before pages existed
    shutil.copytree(shared, older)
    for name in PAGE_FILES:
        (older / name).unlink()
    workspace, channel, _ = machines["gfx942"]
    again = orchestrate("publish", "--workspace", str(workspace), "--channel", str(channel), "--to", older.as_uri())
    assert again.returncode == 0, again.stderr
    assert "nothing to publish" in again.stdout
    page = (older / "index.html").read_text()
    assert 'id="arch-gfx942"' in page and 'id="arch-gfx1151"' in page  # the page of the whole channel
    assert json.loads((older / "channel-page.json").read_text())["channel_url"] == older.as_uri()


def test_a_publish_with_nothing_new_writes_again_a_page_stopped_before_it_named_the_newest_package(team, tmp_path):
    """A publish stopped after indexing and before the page leaves a page without its packages: the next one,
    with nothing to place, sees that the page's data does not name what the index lists, and writes it."""
    machines, shared = team
    stopped = tmp_path / "team"
    shutil.copytree(shared, stopped)
    data = json.loads((stopped / "channel-page.json").read_text())
    gfx942 = next(arch for arch in data["architectures"] if arch["name"] == "gfx942")
    gfx942["packages"] = gfx942["packages"][1:]  # the page as it was before the stopped publish's last package
    (stopped / "channel-page.json").write_text(json.dumps(data))
    workspace, channel, _ = machines["gfx942"]
    again = orchestrate("publish", "--workspace", str(workspace), "--channel", str(channel), "--to", stopped.as_uri())
    assert again.returncode == 0, again.stderr
    assert "nothing to publish" in again.stdout
    assert json.loads((stopped / "channel-page.json").read_text()) != data
    assert json.loads((shared / "channel-page.json").read_text())["architectures"] == \
        json.loads((stopped / "channel-page.json").read_text())["architectures"]


def test_recovery_removes_bench_and_page_copies_a_killed_local_write_left_staged(team, tmp_path):
    from orchestrate.channel import Channel

    machines, _ = team
    _, built, _ = machines["gfx1151"]
    channel = tmp_path / "channel"
    shutil.copytree(built, channel)
    before = {p: p.read_bytes() for p in channel.rglob("*") if p.is_file()}
    file = pytorch_file(built)
    record = channel / record_path("gfx1151", file)
    staged = [record.with_name(f".{record.name}.host-1-1.incoming"),  # killed between the bench file and its record
              channel / (bench_path("gfx1151", file).replace("/pytorch", "/.pytorch") + ".host-1-2.incoming"),
              channel / ".index.html.host-1-3.incoming"]
    for path in staged:
        path.write_text("{")
    recovery = Channel(channel).recover(lambda package, provenance: None)
    assert sorted(recovery.stray) == sorted(str(p.relative_to(channel)) for p in staged)
    assert {p: p.read_bytes() for p in channel.rglob("*") if p.is_file()} == before


def test_a_machine_taking_packages_from_the_team_channel_takes_their_benchmarks_too(team, tmp_path):
    """...and nothing else: a teammate planted a record whose result is `bench/evil/../../../home/.bashrc` (from
    the team folder a file they wrote; from this machine's channel, its ~/.bashrc). It is refused, named, and
    the build goes on."""
    from orchestrate.share.bench import encode_record

    machines, shared = team
    workspace, channel, _ = machines["gfx942"]
    planted = tmp_path / "mnt" / "team"
    shutil.copytree(shared, planted)
    payload = b"touch PWNED\n"
    (tmp_path / "mnt" / "home").mkdir()
    (tmp_path / "mnt" / "home" / ".bashrc").write_bytes(payload)
    (tmp_path / "home").mkdir()
    bashrc = tmp_path / "home" / ".bashrc"
    bashrc.write_text("# the victim's own\n")
    evil_record = record_path("gfx1100", pytorch_file(channel))
    (planted / evil_record).write_bytes(encode_record("bench/evil/../../../home/.bashrc", payload))
    fresh = tmp_path / "fresh"
    result = orchestrate("build-all", "--workspace", str(workspace), "--channel", str(fresh), "--arch", "gfx942",
                         "--no-tests", "-q", "--cache-channel", planted.as_uri())
    assert result.returncode == 0, result.stderr
    assert "10 from cache" in result.stdout
    assert bashrc.read_text() == "# the victim's own\n" and "Traceback" not in result.stdout + result.stderr
    assert evil_record in result.stderr
    bench = bench_path("gfx942", pytorch_file(channel))
    assert (fresh / bench).read_bytes() == (shared / bench).read_bytes()
    assert "gfx942" in (fresh / "index.html").read_text()
    assert orchestrate("verify", "--workspace", str(workspace), "--channel", str(fresh)).returncode == 0


def test_publish_leaves_out_a_result_the_page_cannot_read_and_names_it(team, tmp_path):
    """A result of the right schema whose values have other shapes would sit in the shared channel for good
    (create-only): publish names it and publishes the package without it."""
    from orchestrate.share.bench import encode_record

    machines, _ = team
    workspace, channel, document = machines["gfx1151"]
    local = tmp_path / "channel"
    shutil.copytree(channel, local)
    file = pytorch_file(channel)
    odd = json.dumps({**json.loads((local / bench_path("gfx1151", file)).read_text()), "rows": ["x"]}).encode()
    (local / bench_path("gfx1151", file)).write_bytes(odd)
    (local / record_path("gfx1151", file)).write_bytes(encode_record(bench_path("gfx1151", file), odd))
    target = tmp_path / "team"
    published = orchestrate("publish", "--workspace", str(workspace), "--channel", str(local), "--to", target.as_uri())
    assert published.returncode == 0, published.stderr
    [warning] = [line for line in published.stderr.splitlines() if "not publishing" in line]
    assert f"{bench_path('gfx1151', file)}, the benchmark result of {file}" in warning
    assert "cannot read it (an item of rows is a string, not an object)" in warning
    assert (target / file).is_file() and not (target / bench_path("gfx1151", file)).exists()


def test_publish_to_a_planted_channel_writes_nothing_outside_it_and_copies_nothing_into_it(team, tmp_path):
    """Issue 31, from the publisher's side: a teammate replaced a lookup entry with a symlink to the publisher's
    credentials and bench/gfx942 with a symlink to a folder outside the channel (orchestrate-manifest.json not
    derived yet, so the entries are read one by one). The publish follows neither: it names the folder, puts its
    own entry in place of the link (not through it), and no canary reaches the manifest or the page."""
    machines, shared = team
    workspace, channel, _ = machines["gfx942"]
    home = tmp_path / "home"
    home.mkdir()
    credentials = home / "application_default_credentials.json"
    credentials.write_text('{"private_key": "CANARY-publish-7f3e"}')
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "team"
    shutil.copytree(shared, target)
    (target / "orchestrate-manifest.json").unlink()
    file = pytorch_file(channel)
    entry = target / "orchestrate-manifest.d" / f"{file}.json"
    entry.unlink()
    entry.symlink_to(credentials)
    shutil.rmtree(target / "bench" / "gfx942")
    (target / "bench" / "gfx942").symlink_to(outside, target_is_directory=True)
    published = orchestrate("publish", "--workspace", str(workspace), "--channel", str(channel), "--to", target.as_uri())
    assert published.returncode == 0, published.stderr
    assert "Traceback" not in published.stdout + published.stderr
    assert "bench/gfx942" in published.stderr and "symlink" in published.stderr
    assert list(outside.iterdir()) == [] and credentials.read_text() == '{"private_key": "CANARY-publish-7f3e"}'
    assert not entry.is_symlink() and json.loads(entry.read_text())["file"] == file
    for name in ("orchestrate-manifest.json", "channel-page.json", "index.html"):
        assert "CANARY" not in (target / name).read_text()
    verified = orchestrate("verify", "--workspace", str(workspace), "--from", target.as_uri())
    assert verified.returncode == 1 and "bench/gfx942" in verified.stdout, verified.stdout
    # the lookup folder itself a symlink to a folder outside (its packages recorded in the manifest already):
    # the records that would go there are named and left out, nothing is written through it
    elsewhere = tmp_path / "team-lookup"
    shutil.copytree(shared, elsewhere)
    shutil.rmtree(elsewhere / "orchestrate-manifest.d" / "linux-64")
    (elsewhere / "orchestrate-manifest.d" / "linux-64").symlink_to(outside, target_is_directory=True)
    again = orchestrate("publish", "--workspace", str(workspace), "--channel", str(channel), "--to", elsewhere.as_uri())
    assert again.returncode == 0 and "Traceback" not in again.stdout + again.stderr, again.stderr
    assert "orchestrate-manifest.d/linux-64" in again.stderr and "remove that" in again.stderr
    assert list(outside.iterdir()) == []
