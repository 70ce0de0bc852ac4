"""The recipes' wheel installer streams: its peak memory does not grow with a member's size (TheRock's devel wheel
carries a _devel.tar of gigabytes, stored), and what it records is what it wrote. The full-size figures are
tests/benchmarks/wheel_stream.py's (docs/prebuilt-or-source.md)."""
from __future__ import annotations

import base64
import csv
import hashlib
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))
from wheel_stream import INSTALLER, make_wheel, ours  # noqa: E402

sys.path.insert(0, str(INSTALLER.parent))
import install_wheels  # noqa: E402


def test_peak_memory_does_not_grow_with_the_members_size(tmp_path):
    peaks = {}
    for mib in (8, 96):
        (tmp_path / str(mib)).mkdir()
        wheel = make_wheel(tmp_path / str(mib) / "rocm_sdk_devel-10.1.0-py3-none-linux_x86_64.whl", mib)
        peaks[mib] = ours(INSTALLER, wheel, tmp_path / str(mib))[1]
        wheel.unlink()
    # reading the member whole (and the file again to hash it) added two copies: 176 MiB more here
    assert peaks[96] - peaks[8] < 24, peaks


def test_the_record_holds_the_hash_and_size_of_each_streamed_file(tmp_path):
    wheel = make_wheel(tmp_path / "rocm_sdk_devel-10.1.0-py3-none-linux_x86_64.whl", 3)
    site = tmp_path / "prefix/lib/python3.12/site-packages"
    install_wheels.install(wheel, tmp_path / "prefix", site, "3.12", {})
    rows = {row[0]: row[1:] for row in csv.reader((site / "rocm_sdk_devel-10.1.0.dist-info/RECORD").open())}
    data = (site / "rocm_sdk_devel/_devel.tar").read_bytes()
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert rows["rocm_sdk_devel/_devel.tar"] == [f"sha256={digest}", str(3 << 20)]


def test_a_scripts_python_shebang_is_rewritten_while_streaming_and_recorded_as_written(tmp_path):
    from prebuilt_helpers import make_wheel
    wheel = make_wheel(tmp_path, "tool", "1.0", "py3-none-any",
                       {"tool/__init__.py": "", "tool-1.0.data/scripts/tool": "#!python\nprint('hi')\n"})
    site = tmp_path / "prefix/lib/python3.12/site-packages"
    install_wheels.install(wheel, tmp_path / "prefix", site, "3.12", {})
    script = tmp_path / "prefix/bin/tool"
    assert script.read_text() == "#!/usr/bin/env python\nprint('hi')\n"
    rows = {row[0]: row[1:] for row in csv.reader((site / "tool-1.0.dist-info/RECORD").open())}
    assert rows["../../../bin/tool"] == [install_wheels.record_hash(script.read_bytes()), str(script.stat().st_size)]
