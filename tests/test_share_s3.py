"""S3-compatible storage on 127.0.0.1 (moto's standalone server): publish, index, install, and the
shared channel as a build cache, including a tampered package that must be refused."""
from __future__ import annotations

import json

import pytest

from share_helpers import (
    S3_ENV,
    bucket_keys,
    build_channel,
    make_workspace,
    moto_server,
    orchestrate,
    s3_client,
    s3_rattler_client,
    solve_and_install,
)

pytestmark = pytest.mark.timeout(180)
BUCKET = "team"


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with moto_server() as endpoint:
        s3_client(endpoint).create_bucket(Bucket=BUCKET)
        yield endpoint


@pytest.fixture(scope="module")
def published(s3, tmp_path_factory):
    """The test graph built once and published to s3://team/<prefix>."""
    root = tmp_path_factory.mktemp("s3")
    workspace = make_workspace(root)
    channel = root / "channel"
    assert build_channel(workspace, channel).returncode == 0
    env = {**S3_ENV, "AWS_ENDPOINT_URL": s3}
    result = orchestrate("publish", "--workspace", str(workspace), "--channel", str(channel),
                         "--to", f"s3://{BUCKET}/stack", env=env)
    assert result.returncode == 0, result.stderr
    return workspace, channel, env, result


def test_publish_indexes_and_the_stack_installs_from_s3(published, s3, tmp_path, monkeypatch):
    workspace, channel, env, result = published
    assert "published 10 package(s)" in result.stdout
    keys = bucket_keys(s3_client(s3), BUCKET)
    assert "stack/linux-64/repodata.json" in keys and "stack/noarch/repodata.json" in keys
    remote_manifest = json.loads(keys["stack/orchestrate-manifest.json"])["packages"]
    assert set(remote_manifest) == set(json.loads((channel / "orchestrate-manifest.json").read_text())["packages"])
    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)
    installed = solve_and_install(f"s3://{BUCKET}/stack", tmp_path / "env", client=s3_rattler_client(s3, BUCKET))
    assert {"pytorch", "vllm", "flash-attn", "rocm-stack-check"} <= set(installed)


def test_publishing_what_is_there_is_a_no_op(published, s3):
    workspace, channel, env, _ = published
    before = bucket_keys(s3_client(s3), BUCKET)
    again = orchestrate("publish", "--workspace", str(workspace), "--channel", str(channel),
                        "--to", f"s3://{BUCKET}/stack", env=env)
    assert again.returncode == 0 and "nothing to publish" in again.stdout
    assert bucket_keys(s3_client(s3), BUCKET) == before


def test_cache_hits_skip_builds_and_a_changed_input_builds(published, tmp_path):
    workspace, _, env, _ = published
    fresh = tmp_path / "fresh"
    warm = build_channel(workspace, fresh, "--cache-channel", f"s3://{BUCKET}/stack", env=env)
    assert warm.returncode == 0, warm.stderr
    assert "10 from cache" in warm.stdout and "built " not in warm.stdout
    manifest = json.loads((fresh / "orchestrate-manifest.json").read_text())["packages"]
    assert {e["source"] for e in manifest.values()} == {f"s3://{BUCKET}/stack"}

    # A changed recipe gives aiter (and vllm, which needs it) a new input hash: those two build.
    recipe = workspace / "recipes" / "aiter" / "recipe.yaml"
    recipe.write_text(recipe.read_text() + "\n# a change that alters the input hash\n")
    other = tmp_path / "other"
    mixed = build_channel(workspace, other, "--cache-channel", f"s3://{BUCKET}/stack", env=env)
    assert mixed.returncode == 0, mixed.stderr
    built = {line.split()[1].rsplit("-", 2)[0] for line in mixed.stdout.splitlines() if line.startswith("built ")}
    assert built == {"aiter", "vllm"}
    assert "8 from cache" in mixed.stdout


def test_a_tampered_remote_package_is_refused(published, s3, tmp_path):
    workspace, _, env, _ = published
    client = s3_client(s3)
    key = next(k for k in bucket_keys(client, BUCKET) if "/rocm-sdk-" in k and k.endswith(".conda"))
    original = client.get_object(Bucket=BUCKET, Key=key)["Body"].read()
    client.put_object(Bucket=BUCKET, Key=key, Body=original[:-64] + b"\0" * 64)  # index not updated
    try:
        local = tmp_path / "local"
        result = build_channel(workspace, local, "--cache-channel", f"s3://{BUCKET}/stack", env=env)
    finally:
        client.put_object(Bucket=BUCKET, Key=key, Body=original)
    assert result.returncode != 0
    error = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "rocm-sdk-" in error[0] and f"s3://{BUCKET}/stack" in error[0]
    assert not list(local.rglob("*.conda")), "nothing from the tampered channel may enter the local channel"


def test_publish_from_another_machine_merges_the_manifest(published, s3, tmp_path):
    workspace, _, env, _ = published
    other = tmp_path / "gfx1100"
    result = orchestrate("build", "--workspace", str(workspace), "--channel", str(other), "--arch", "gfx1100",
                         "--no-tests", "rocm-sdk", env=env)
    assert result.returncode == 0, result.stderr
    before = json.loads(bucket_keys(s3_client(s3), BUCKET)["stack/orchestrate-manifest.json"])["packages"]
    pub = orchestrate("publish", "--workspace", str(workspace), "--channel", str(other),
                      "--to", f"s3://{BUCKET}/stack", env=env)
    assert pub.returncode == 0, pub.stderr
    after = json.loads(bucket_keys(s3_client(s3), BUCKET)["stack/orchestrate-manifest.json"])["packages"]
    assert set(before) < set(after) and any("gfx1100" in f for f in after)
