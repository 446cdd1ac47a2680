"""scripts/build_base_image.sh decides to rebuild from the package list: the base image's label is
the hash of suite and packages, so a machine whose base was built from another list (before g++
and the JDK were added) rebuilds it without MUCODE_REBUILD_BASE. ``docker`` and ``debootstrap`` are
stand-ins on PATH here (they record what the script asks of them); the real build is what
scripts/docker_setup.sh runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "build_base_image.sh"
FAKE_DOCKER = """#!/bin/sh
if [ "$1" = image ]; then cat "$FAKE_DIR/label" 2>/dev/null; exit 0; fi
if [ "$1" = import ]; then cat >/dev/null; echo "$@" > "$FAKE_DIR/import"; exit 0; fi
exit 1
"""
FAKE_DEBOOTSTRAP = """#!/bin/sh
echo "$2" > "$FAKE_DIR/include"
mkdir -p "$4/usr/share/doc" && echo x > "$4/etc-file"
"""


def build(tmp_path: Path, label: str | None) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, text in (("docker", FAKE_DOCKER), ("debootstrap", FAKE_DEBOOTSTRAP)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    (tmp_path / "import").unlink(missing_ok=True)
    if label is not None:
        (tmp_path / "label").write_text(label + "\n")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "FAKE_DIR": str(tmp_path)}
    env.pop("MUCODE_REBUILD_BASE", None)
    return subprocess.run(
        ["bash", str(SCRIPT), "mucode-sandbox-base:test"], env=env, capture_output=True, text=True
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="the script refuses to debootstrap without root")
def test_a_base_built_from_another_package_list_is_rebuilt(tmp_path: Path) -> None:
    first = build(tmp_path, "0123456789abcdef")  # a base labelled with an older list's hash
    assert first.returncode == 0, first.stderr
    assert "up to date" not in first.stdout and "built mucode-sandbox-base:test" in first.stdout
    include = (tmp_path / "include").read_text()
    assert "g++" in include and "openjdk-17-jdk-headless" in include and "python3-numpy" in include
    key = (tmp_path / "import").read_text().split("LABEL mucode.base=")[1].split()[0]
    again = build(tmp_path, key)  # the base this list builds: left alone
    assert again.returncode == 0 and "up to date" in again.stdout, again.stdout
    assert not (tmp_path / "import").exists()
