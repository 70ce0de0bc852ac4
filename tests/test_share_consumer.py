"""`orchestrate consumer-manifest`: a pixi.toml that validates against pixi's schema (tests/data/pixi/SOURCE.md)."""
from __future__ import annotations

import json
import tomllib

import pytest

from orchestrate.architectures import override_hint
from share_helpers import REPO, make_workspace, orchestrate

SCHEMA = REPO / "tests" / "data" / "pixi" / "schema-v0.77.0.json"  # its source and date: SOURCE.md beside it


def validate(text: str) -> dict:
    manifest = tomllib.loads(text)
    import jsonschema  # a test extra (pyproject.toml)

    jsonschema.validate(manifest, json.loads(SCHEMA.read_text()))
    return manifest


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return make_workspace(tmp_path_factory.mktemp("consumer"))


def test_manifest_for_every_machine(workspace, tmp_path):
    result = orchestrate("consumer-manifest", "--workspace", str(workspace), "--channel", "http://lab:8765",
                         "--output", str(tmp_path))
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "pixi.toml").read_text()
    manifest = validate(text)
    assert manifest["workspace"]["channels"] == ["http://lab:8765", "conda-forge"]
    assert manifest["workspace"]["platforms"] == ["linux-64"]
    assert set(manifest["dependencies"]) == {"rocm-stack", "pytorch-rocm", "pytorch", "vllm", "rocm-stack-check"}
    # flash-attn comes with rocm-stack; the other backend is offered, commented out, with the command that builds it
    assert "# flash-attn comes with rocm-stack" in text
    assert '# flash-attn = { version = "*", build = "*_ck_*" }' in text
    assert "orchestrate build flash-attn --variant flash_attn_backend=ck" in text
    assert "__amdgpu_arch" in text and f"{override_hint('11.5.1')} pixi install" in text
    again = orchestrate("consumer-manifest", "--workspace", str(workspace), "--channel", "http://lab:8765",
                        "--output", str(tmp_path / "pixi.toml"))
    assert again.returncode != 0 and "--force" in again.stderr


def test_pinned_arch_and_arch_without_flash_attn(workspace):
    result = orchestrate("consumer-manifest", "--workspace", str(workspace), "--channel", "http://lab:8765",
                         "--arch", "gfx908", "--print")
    manifest = validate(result.stdout)
    deps = manifest["dependencies"]
    assert deps["pytorch"] == {"version": "*", "build": "*gfx908*"} and deps["pytorch-rocm"] == "*"
    assert "flash-attn" not in deps and deps["rocm-stack-check"] == "*"
    assert "# flash-attn: not built for gfx908 (no flash-attn backend supports it)" in result.stdout
    pinned = orchestrate("consumer-manifest", "--workspace", str(workspace), "--channel", "http://lab:8765",
                         "--arch", "gfx1151", "--print").stdout
    assert "# flash-attn comes with rocm-stack (triton backend on gfx1151)" in pinned
    assert '# flash-attn = { version = "*", build = "*gfx1151_ck_*" }' in pinned
    assert f"{override_hint('9.0.8')} pixi install" in result.stdout  # what solves without a GPU: tests/test_orchestrate_build.py


def test_s3_channel_gets_pixi_s3_options(workspace):
    result = orchestrate("consumer-manifest", "--workspace", str(workspace), "--channel", "s3://team/stack",
                         "--print", env={"AWS_ENDPOINT_URL": "http://minio.lab:9000"})
    manifest = validate(result.stdout)
    assert manifest["workspace"]["s3-options"]["team"] == {
        "endpoint-url": "http://minio.lab:9000", "region": "us-east-1", "force-path-style": True}


def test_folder_channel_becomes_absolute(tmp_path):
    result = orchestrate("consumer-manifest", "--channel", "shared", "--print", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert validate(result.stdout)["workspace"]["channels"][0] == (tmp_path / "shared").as_uri()


def test_the_documented_container_recipe_uses_the_hint_that_solves():
    """docs' Dockerfile installs at image build time, where no GPU is seen: it must carry the whole hint
    (tests/test_orchestrate_build.py solves rocm-stack with it; the ISA alone solves nothing)."""
    text = (REPO / "docs" / "getting-started.md").read_text()
    dockerfile = text.split("```dockerfile", 1)[1].split("```", 1)[0]
    assert f"RUN {override_hint('11.5.1')} pixi install" in dockerfile


@pytest.mark.parametrize("url, carried, login, variable", [
    ("https://conda.example.org/t/tk-SECRET-42/team/stack", "tk-SECRET-42", "--conda-token TOKEN",
     "https://conda.example.org/t/$ROCM_STACK_CHANNEL_TOKEN/team/stack"),
    ("https://bob:SECRET-pw@conda.example.org/team/stack", "SECRET-pw", "--username USER --password PASSWORD",
     "https://$ROCM_STACK_CHANNEL_USERINFO@conda.example.org/team/stack"),
], ids=["conda token in the path", "user and password"])
def test_a_channel_url_with_credentials_writes_none_of_them(workspace, tmp_path, url, carried, login, variable):
    """A pixi.toml is committed and shared: the manifest writes the channel without the URL's token or password,
    names the `pixi auth login` that supplies them, and its verify task takes them from the teammate's
    environment."""
    result = orchestrate("consumer-manifest", "--workspace", str(workspace), "--channel", url, "--arch", "gfx1151",
                         "--output", str(tmp_path))
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "pixi.toml").read_text()
    assert carried not in text and carried not in result.stdout + result.stderr
    manifest = validate(text)
    assert manifest["workspace"]["channels"] == ["https://conda.example.org/team/stack", "conda-forge"]
    assert f"pixi auth login conda.example.org {login}" in text
    assert f'"{variable}"' in manifest["feature"]["verify"]["tasks"]["verify-channel"]
