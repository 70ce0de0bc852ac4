"""Publishing that cannot succeed: one clear line, a non-zero exit, nothing half-published, no secret shown."""
from __future__ import annotations

import json

import pytest

from share_helpers import (
    S3_ENV,
    bucket_keys,
    build_channel,
    free_port,
    make_workspace,
    moto_server,
    orchestrate,
    s3_client,
)

pytestmark = pytest.mark.timeout(180)
SECRET = "do-not-print-this-secret"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("failures")
    workspace = make_workspace(root)
    channel = root / "channel"
    assert build_channel(workspace, channel).returncode == 0
    return workspace, channel


def publish(built, target: str, env: dict, *extra: str):
    workspace, channel = built
    return orchestrate("publish", "--workspace", str(workspace), "--channel", str(channel), "--to", target,
                       *extra, env=env)


def one_error_line(result) -> str:
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert SECRET not in result.stdout + result.stderr
    return lines[0]


def test_unreachable_s3_endpoint(built):
    closed = f"http://127.0.0.1:{free_port()}"
    line = one_error_line(publish(built, "s3://team/stack", {**S3_ENV, "AWS_SECRET_ACCESS_KEY": SECRET},
                                  "--s3-endpoint-url", closed))
    assert "cannot reach" in line and closed in line


def test_unreachable_http_cache_channel(built, tmp_path):
    workspace, _ = built
    closed = f"http://127.0.0.1:{free_port()}/channel"
    result = build_channel(workspace, tmp_path / "local", "--cache-channel", closed)
    assert "cannot reach" in one_error_line(result)
    assert not (tmp_path / "local").exists() or not list((tmp_path / "local").rglob("*.conda"))


@pytest.fixture(scope="module")
def iam_s3():
    """moto with IAM enforced: only the key created here is accepted."""
    with moto_server(enforce_iam=True) as endpoint:
        import boto3

        iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="bootstrap",
                           aws_secret_access_key="bootstrap")
        iam.create_user(UserName="ci")
        key = iam.create_access_key(UserName="ci")["AccessKey"]
        iam.put_user_policy(UserName="ci", PolicyName="s3", PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}))
        good = s3_client(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
        good.create_bucket(Bucket="team")
        yield endpoint, good


def test_bad_credentials(built, iam_s3):
    endpoint, good = iam_s3
    env = {"AWS_ACCESS_KEY_ID": "AKIANOTAREALKEY00000", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1"}
    line = one_error_line(publish(built, "s3://team/stack", env, "--s3-endpoint-url", endpoint))
    assert "refused the credentials" in line and "AWS_* environment variables" in line
    assert bucket_keys(good, "team") == {}


def test_verify_with_bad_credentials_is_one_line(iam_s3, tmp_path):
    endpoint, _ = iam_s3
    env = {"AWS_ACCESS_KEY_ID": "AKIANOTAREALKEY00000", "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1"}
    result = orchestrate("verify", "--from", "s3://team/stack", "--s3-endpoint-url", endpoint, cwd=tmp_path, env=env)
    assert result.returncode == 2
    assert "refused the credentials" in one_error_line(result)


def test_bucket_that_does_not_exist(built):
    with moto_server() as endpoint:
        line = one_error_line(publish(built, "s3://no-such-bucket/stack", S3_ENV, "--s3-endpoint-url", endpoint))
    assert "bucket no-such-bucket does not exist" in line


def test_a_failed_upload_indexes_nothing_and_the_next_publish_completes(built, tmp_path):
    """The target refuses the third package: nothing is indexed, so no teammate sees half a publish. The
    two files uploaded before it stay (another machine publishing at the same time may rely on them); the
    next publish finds them there and completes."""
    target = tmp_path / "shared"
    (target / "linux-64").mkdir(parents=True)
    workspace, channel = built
    third = sorted(p.name for p in (channel / "linux-64").glob("*.conda"))[2]
    (target / "linux-64" / third).mkdir()  # the name is taken by something that is not a package
    result = publish(built, target.as_uri(), {})
    line = one_error_line(result)
    assert third in line and "not a file" in line
    assert not (target / "linux-64" / "repodata.json").exists()
    assert not (target / "orchestrate-manifest.json").exists()

    (target / "linux-64" / third).rmdir()
    again = publish(built, target.as_uri(), {})
    assert again.returncode == 0, again.stderr
    listed = json.loads((target / "linux-64" / "repodata.json").read_text())["packages.conda"]
    assert set(listed) == {p.name for p in (channel / "linux-64").glob("*.conda")}
    assert set(json.loads((target / "orchestrate-manifest.json").read_text())["packages"]) == \
        set(json.loads((channel / "orchestrate-manifest.json").read_text())["packages"])


def test_auth_store_credentials_reach_s3(built, tmp_path):
    """No AWS_* variables: the keys come from RATTLER_AUTH_FILE, as pixi and rattler-build would read them."""
    auth_file = tmp_path / "auth.json"
    auth_file.write_text(json.dumps({"s3://team": {"S3Credentials": {
        "access_key_id": "from-auth-file", "secret_access_key": SECRET, "session_token": None}}}))
    with moto_server() as endpoint:
        s3_client(endpoint).create_bucket(Bucket="team")
        env = {"RATTLER_AUTH_FILE": str(auth_file), "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""}
        result = publish(built, "s3://team/stack", env, "--s3-endpoint-url", endpoint)
        assert result.returncode == 0, result.stderr
        assert SECRET not in result.stdout + result.stderr
        assert "stack/noarch/repodata.json" in bucket_keys(s3_client(endpoint), "team")


def test_bad_targets_and_packages(built):
    assert "ftp:// is not taken here" in one_error_line(publish(built, "ftp://host/channel", {}))
    assert "has no bucket" in one_error_line(publish(built, "s3:///stack", {}))
    assert "read-only over HTTP" in one_error_line(publish(built, f"http://127.0.0.1:{free_port()}/c", {}))
    assert "not in channel" in one_error_line(publish(built, "file:///tmp/unused-target", {}, "no-such-package"))


def test_package_servers_use_py_rattler_build_upload(built, monkeypatch, capsys):
    """prefix.dev et al. cannot be reached from a test: check what we hand py-rattler-build, and that
    the key comes from the environment without being printed."""
    from rattler_build import upload

    from orchestrate.share.targets import HttpStore, parse_target

    calls = []
    monkeypatch.setattr(upload, "upload_package_to_prefix", lambda files, url, channel, **kw: calls.append(
        (files, url, channel, kw)))
    monkeypatch.setattr(HttpStore, "read", lambda self, relpath, limit=None: None)  # a new, empty channel
    monkeypatch.setenv("PREFIX_API_KEY", SECRET)
    from orchestrate import cli

    workspace, channel = built
    code = cli.main(["publish", "--workspace", str(workspace), "--channel", str(channel), "--to", "prefix://my-team"])
    assert code == 0
    (files, url, name, kw), = calls
    assert url == "https://prefix.dev" and name == "my-team" and len(files) == 10
    assert kw["api_key"] == SECRET and kw["skip_existing"] is True
    assert SECRET not in capsys.readouterr().out
    assert parse_target("quetz://q.example/ch", {}).channel_url == "https://q.example/get/ch"
    assert parse_target("anaconda://me/dev", {}).channel_url == "https://conda.anaconda.org/me/label/dev"
