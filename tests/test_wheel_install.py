"""The built wheel installs whole: in a fresh virtual environment, with no source tree in sight, it
carries the in-sandbox executor, the presets and the assets, and judges programs through
``mucode serve --backend local`` (real HTTP on loopback) and ``mucode verify``.

The wheel is built from an sdist of a copy of what the verifier image copies (pyproject.toml,
README.md, mucode/), so the checkout is never written to. The fresh environment gets the heavy dependencies
(fastapi, pydantic, math-verify...) from this interpreter's site-packages through a filtered view
that leaves out every mucode distribution (the editable install, the example plug-in): only the
wheel's ``mucode`` can be imported there, which the test checks before anything else. The local
backend needs root, like the other local-backend tests (CI runs as root).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tarfile
import time
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]
# Names in site-packages that belong to mucode's own (editable or plug-in) installs.
NOT_DEPENDENCIES = ("mucode", "__editable__", "__pycache__")
PROGRAM = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
WRONG = "```python\na, b = map(int, input().split())\nprint(a - b)\n```"
TESTS = {"format": "stdio", "inputs": ["1 2\n", "10 -3\n"], "outputs": ["3\n", "7\n"]}


def _run(
    cmd: list[str],
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout: float = 300,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, (
        f"{cmd} failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    )
    return done


def _build_wheel(tmp: Path) -> Path:
    """sdist first, then the wheel from the unpacked sdist: what ``pip install`` does with an sdist,
    so a file that only the checkout has (a symlink, an unlisted data file) is missing here too."""
    src = tmp / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md", "MANIFEST.in"):
        shutil.copy2(REPO / name, src / name)
    for tree in ("mucode", "sandbox", "configs", "eval"):  # the package and the folders shipped inside it
        shutil.copytree(REPO / tree, src / tree, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    build_sdist = f"from setuptools import build_meta; print(build_meta.build_sdist({str(tmp / 'sdist')!r}))"
    name = _run([sys.executable, "-c", build_sdist], cwd=src).stdout.split()[-1]
    with tarfile.open(tmp / "sdist" / name) as tar:
        tar.extractall(tmp / "sdist", filter="data")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(tmp / "dist"),
            str(tmp / "sdist" / name.removesuffix(".tar.gz")),
        ],
        cwd=tmp,
    )
    (wheel,) = (tmp / "dist").glob("mucode-*.whl")
    return wheel


def _fresh_venv(tmp: Path, wheel: Path) -> Path:
    """A new venv with the wheel installed and this interpreter's dependencies, minus mucode's."""
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], cwd=tmp)
    deps = tmp / "deps"
    deps.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.lower().startswith(NOT_DEPENDENCIES):
            (deps / entry.name).symlink_to(entry)
    python = venv / "bin" / "python"
    purelib = _run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=tmp
    ).stdout.strip()
    # addsitedir (not a plain path line) so that the dependencies' own .pth files are processed
    Path(purelib, "zz_dependencies.pth").write_text(f"import site; site.addsitedir({str(deps)!r})\n")
    _run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "-q",
            str(wheel),
        ],
        cwd=tmp,
    )
    return venv


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return {**env, **extra}


WHERE = """
import importlib.metadata as md, json, sys
import mucode, mucode.config as config, mucode.eval.data as data, mucode.sandbox.executor as ex
print(json.dumps({"mucode": mucode.__file__, "executor": str(ex.EXECUTOR_DIR),
                  "executor_files": sorted(p.name for p in ex.EXECUTOR_DIR.iterdir()),
                  "configs": str(config.CONFIG_DIR), "presets": config.preset_names(),
                  "math_files": sorted(p.name for p in data.MATH_DATA_DIR.iterdir()),
                  "lcb_files": sorted(p.name for p in data.LIVECODEBENCH_DATA_DIR.iterdir()),
                  "dists": sorted(str(d.locate_file("")) for d in md.distributions() if d.metadata["Name"] == "mucode"),
                  "path": sys.path}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve_and_verify(mucode: Path, cwd: Path) -> list[dict[str, object]]:
    port = _free_port()
    env = _clean_env(MUCODE_BACKEND_OPTIONS=json.dumps({"slots": 1, "uid_base": 63800}))
    log = open(cwd / "serve.log", "w")  # noqa: SIM115 - closed below, after the process
    proc = subprocess.Popen(
        [
            str(mucode),
            "serve",
            "--backend",
            "local",
            "--port",
            str(port),
            "--program",
            "code",
            "--log-level",
            "warning",
        ],
        cwd=cwd,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, f"mucode serve exited: {(cwd / 'serve.log').read_text()[-3000:]}"
            try:
                if httpx.get(f"{url}/readyz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"not ready: {(cwd / 'serve.log').read_text()[-3000:]}"
            time.sleep(0.2)
        items = [
            {"id": i, "program": "code", "response": r, "spec": {"tests": TESTS}}
            for i, r in (("right", PROGRAM), ("wrong", WRONG))
        ]
        reply = httpx.post(f"{url}/v1/verify", json={"items": items}, timeout=120)
        assert reply.status_code == 200, reply.text
        results: list[dict[str, object]] = reply.json()["results"]
        return results
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_the_wheel_in_a_fresh_venv_serves_and_verifies_with_the_local_backend(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("the local sandbox backend needs root (CI runs as root)")
    venv = _fresh_venv(tmp_path, _build_wheel(tmp_path))
    work = tmp_path / "cwd"  # nowhere near the checkout
    work.mkdir()

    where = json.loads(_run([str(venv / "bin" / "python"), "-c", WHERE], cwd=work, env=_clean_env()).stdout)
    site = str(venv.resolve())
    assert where["mucode"].startswith(site), where["mucode"]
    assert where["executor"].startswith(site) and where["configs"].startswith(site)
    # the top-level sandbox/, configs/ and eval/ folders land inside the package, where the code looks
    assert where["executor"].endswith("mucode/sandbox/executor") and where["configs"].endswith(
        "mucode/configs"
    )
    assert {"math500.jsonl", "aime24.json", "README.md"} <= set(where["math_files"])
    assert "few_shot_generation.json" in where["lcb_files"]
    assert where["dists"] and all(d.startswith(site) for d in where["dists"]), where["dists"]
    assert not any(p.startswith(str(REPO)) for p in where["path"]), where["path"]
    assert {"executor.py", "protocol.py", "jail.sh", "Dockerfile"} <= set(where["executor_files"])
    assert "tiny" in where["presets"]

    results = _serve_and_verify(venv / "bin" / "mucode", work)
    assert [(r["id"], r["status"], r["reward"]) for r in results] == [
        ("right", "correct", 1.0),
        ("wrong", "wrong_answer", 0.0),
    ], results

    lines = "".join(
        json.dumps({"id": i, "response": r, "spec": {"tests": TESTS}}) + "\n"
        for i, r in (("right", PROGRAM), ("wrong", WRONG))
    )
    out = _run(
        [str(venv / "bin" / "mucode"), "verify", "--program", "code", "--backend", "local", "-i", "-"],
        cwd=work,
        stdin=lines,
        env=_clean_env(MUCODE_BACKEND_OPTIONS=json.dumps({"slots": 1, "uid_base": 63810})),
    )
    verified = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    assert [(r["id"], r["status"], r["reward"]) for r in verified] == [
        ("right", "correct", 1.0),
        ("wrong", "wrong_answer", 0.0),
    ], out.stdout
