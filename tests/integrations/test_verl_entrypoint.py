"""The command `mucode verl-config --output` prints runs, in a fresh environment with the `verl` extra.

A new virtual environment on top of this one (its packages through a ``.pth`` file: torch and verl
are not downloaded again) gets the `verl` extra as pyproject.toml declares it, installed with pip from
the package index: whatever verl's trainer imports and this environment lacks is then missing there
too, unless the extra names it. The printed command then runs until verl has composed the config,
passed its ``validate_config`` and its task runner has imported its trainer (transfer_queue and the
rest) and printed the resolved config; past that it would wait for GPUs, so the test stops it there.
Needs the package index (pip) and a few minutes: ``slow``. Ray runs with a temp dir of its own, and
only the processes that name it are stopped.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mucode.cli import get_app

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
VALIDATED = "[validate_config] All configuration checks passed successfully!"
TRAINER_IMPORTED = "'transfer_queue': {"  # the task runner prints the resolved config after its imports

pytestmark = pytest.mark.slow


def _fresh_env(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    Path(site, "base_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["verl"]
    subprocess.run([str(python), "-m", "pip", "install", "-q", *extra], check=True, timeout=600)
    return python


def _stop(proc: subprocess.Popen[bytes], ray_dir: str) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is gone when the command exited alone
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    for pid in os.listdir("/proc"):  # Ray's own processes (their own sessions) name its temp dir
        if pid.isdigit():
            try:
                cmdline = Path("/proc", pid, "cmdline").read_bytes()
            except OSError:
                continue
            if ray_dir.encode() in cmdline:
                os.kill(int(pid), signal.SIGKILL)


def _run(argv: list[str], env_words: list[str], cwd: Path, limit_s: float = 240) -> str:
    """What the printed command writes until its task runner has imported its trainer, or until it
    has written nothing more for ``limit_s`` seconds (normally ~30 s in all). A fresh Ray instance
    (its own temp dir) each time. In one fresh-clone CI run the command wrote nothing for over
    9 minutes after it started Ray: a stall inside Ray's start of the task runner, not in
    anything the printed command decides, so the test runs the command a second time before it fails
    (a command that never gets there fails both)."""
    ray_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray's socket paths must stay short
    env = {
        **os.environ,
        **dict(w.split("=", 1) for w in env_words),
        "RAY_TMPDIR": ray_dir,
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True, cwd=cwd
    )
    assert proc.stdout is not None
    seen = bytearray()
    start = time.monotonic()
    try:
        while TRAINER_IMPORTED.encode() not in seen and b"ModuleNotFoundError: " not in seen:
            if not select.select([proc.stdout], [], [], limit_s)[0]:
                seen += f"\n[test] nothing more after {time.monotonic() - start:.0f} s\n".encode()
                break
            chunk = os.read(proc.stdout.fileno(), 1 << 16)
            if not chunk:
                seen += f"\n[test] the command exited ({proc.wait()})\n".encode()
                break
            seen += chunk
    finally:
        _stop(proc, ray_dir)
        proc.stdout.close()
    return seen.decode(errors="replace")


@pytest.mark.timeout(1500)  # the fresh environment's pip (up to 600 s), then up to two runs
def test_the_printed_verl_command_runs_past_config_validation(tmp_path: Path) -> None:
    python = _fresh_env(tmp_path / "venv")
    out = CliRunner().invoke(
        get_app(),
        [
            "verl-config",
            "-c",
            "tiny",
            "--output",
            str(tmp_path / "run"),
            "--verifier-url",
            "http://127.0.0.1:9",
        ],
    )
    assert out.exit_code == 0, out.output
    (command,) = [line for line in out.stdout.splitlines() if "verl.trainer.main_ppo" in line]
    words = shlex.split(command)
    env_words = [w for w in words if re.match(r"^[A-Z_]+=", w)]
    argv = [str(python) if w == "python" else w for w in words if w not in env_words]
    text = _run(argv, env_words, tmp_path)
    assert "ModuleNotFoundError: " not in text, text[-3000:]  # not the optional engines' warnings
    assert VALIDATED in text, text[-3000:]
    if TRAINER_IMPORTED not in text:  # once more: see _run
        first, text = text, _run(argv, env_words, tmp_path)
        assert "ModuleNotFoundError: " not in text, text[-3000:]
        assert TRAINER_IMPORTED in text, f"first run: {first[-1500:]}\nsecond run: {text[-1500:]}"
