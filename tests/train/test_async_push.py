"""The push weight hand-off over gloo with real processes on the CPU (``mucode.train.async_push``).

- the trainer's side in this process, two receiver processes: each sees versions in order, and every
  pushed tensor equals what the file hand-off writes for the same weights (float32, and bfloat16 as a
  mixed-precision run publishes);
- a sender killed half-way through a version: the receiver keeps the previous version, complete, and
  reports the broken push (a generator never applies a half-received policy).

The nccl path runs the same code on GPUs (``scripts/gpu_check.py --async``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from mucode.train.async_handoff import FileHandoff
from mucode.train.async_push import PushHandoff, PushReceiver

RECEIVER = """
import json, os, sys, time
from pathlib import Path
import torch
from safetensors.torch import save_file
from mucode.train.async_push import PushReceiver

address, index, out, last = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), int(sys.argv[4])
receiver = PushReceiver(address, "gloo", index, torch.device("cpu"))
seen = []
while not seen or seen[-1] < last:
    got = receiver.latest()
    if got is not None and (not seen or got.version != seen[-1]):
        seen.append(got.version)
        if got.weights is not None:
            cpu = {k: v.detach().cpu().clone() for k, v in got.weights.items()}
            save_file(cpu, str(out / f"g{index}-v{got.version}.safetensors"))
        else:
            (out / f"g{index}-v{got.version}.path").write_text(got.path)
    assert receiver.error is None, receiver.error
    time.sleep(0.01)
(out / f"g{index}.json").write_text(json.dumps(seen))
os._exit(0)  # the receiving thread still waits for a next version
"""


def _weights(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "model.embed_tokens.weight": torch.randn(50, 8, generator=g),
        "model.layers.0.mlp.weight": torch.randn(8, 8, generator=g),
        "model.norm.weight": torch.randn(8, generator=g),
        "model.step": torch.tensor([seed], dtype=torch.int64),
    }


def _file_version(
    handoff: FileHandoff, version: int, weights: dict[str, torch.Tensor], dtype: torch.dtype | None
) -> Path:
    def save(directory: Path) -> None:
        directory.mkdir()
        cast = {
            k: v.to(dtype) if dtype is not None and v.is_floating_point() else v for k, v in weights.items()
        }
        save_file(cast, str(directory / "model.safetensors"))

    handoff.publish(version, save)
    latest = handoff.latest()
    assert latest is not None and latest.version == version
    return Path(latest.path) / "model.safetensors"


def _wait_for(path: Path, procs: list[subprocess.Popen[bytes]], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        for p in procs:
            assert p.poll() in (None, 0), f"a receiver died with {p.returncode}"
        assert time.monotonic() < deadline, f"{path.name} never arrived"
        time.sleep(0.05)


def test_two_receivers_get_every_version_equal_to_the_file_handoff(tmp_path: Path) -> None:
    push = PushHandoff("gloo", generators=2, device=torch.device("cpu"))
    files = FileHandoff(tmp_path / "weights")
    out = tmp_path / "out"
    out.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RECEIVER, push.address, str(g), str(out), "8"], env=os.environ.copy()
        )
        for g in range(2)
    ]
    try:
        push.publish_path(0, "/base/policy")
        for g in range(2):
            _wait_for(out / f"g{g}-v0.path", procs)
        versions = {
            4: (_weights(4), None),
            8: (_weights(8), torch.bfloat16),
        }  # 8: a mixed run's compute dtype
        for version, (weights, dtype) in versions.items():
            written = _file_version(files, version, weights, dtype)
            cast = {
                k: v.to(dtype) if dtype is not None and v.is_floating_point() else v
                for k, v in weights.items()
            }
            push.publish(version, lambda d: None, lambda cast=cast: iter(cast.items()))
            for g in range(2):
                _wait_for(out / f"g{g}-v{version}.safetensors", procs)
                got, expected = load_file(str(out / f"g{g}-v{version}.safetensors")), load_file(str(written))
                assert got.keys() == expected.keys()
                for name in expected:
                    assert got[name].dtype == expected[name].dtype, name
                    assert torch.equal(got[name], expected[name]), name
        for p in procs:
            assert p.wait(timeout=60) == 0
        for g in range(2):
            assert json.loads((out / f"g{g}.json").read_text()) == [0, 4, 8]
            assert (out / f"g{g}-v0.path").read_text() == "/base/policy"
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        push.close()


TORN_SENDER = """
import os, signal, sys, time, datetime
import torch
import torch.distributed as dist
from mucode.train.async_push import _pack, join_pair, send_message

store = dist.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
print(store.port, flush=True)
while int(store.add("join/0", 0)) == 0:
    time.sleep(0.02)
group = join_pair(f"127.0.0.1:{store.port}", "gloo", 0, 0, count=1)
weights = {"w": torch.arange(12, dtype=torch.float32).reshape(3, 4)}
send_message(group, _pack(4, "", weights.items(), torch.device("cpu")), torch.device("cpu"))
sys.stdin.readline()  # the test has seen version 4
torn = _pack(8, "", {"w": -weights["w"]}.items(), torch.device("cpu"))
send_message(group, torn, torch.device("cpu"), stop_after="meta")
os.kill(os.getpid(), signal.SIGKILL)  # dies after version 8's header, before its tensors
"""


def test_a_sender_killed_mid_version_leaves_the_previous_one(tmp_path: Path) -> None:
    sender = subprocess.Popen(
        [sys.executable, "-c", TORN_SENDER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=os.environ.copy(),
    )
    try:
        assert sender.stdout is not None and sender.stdin is not None
        port = int(sender.stdout.readline())
        receiver = PushReceiver(f"127.0.0.1:{port}", "gloo", 0, torch.device("cpu"))
        deadline = time.monotonic() + 120
        while receiver.latest() is None:
            assert time.monotonic() < deadline and receiver.error is None
            time.sleep(0.02)
        sender.stdin.write(b"go\n")
        sender.stdin.flush()
        assert sender.wait(timeout=60) == -signal.SIGKILL
        while receiver.error is None:  # the broken connection ends the receive of version 8
            assert time.monotonic() < deadline, "the receiver never noticed the dead sender"
            time.sleep(0.02)
        latest = receiver.latest()
        assert latest is not None and latest.version == 4 and latest.weights is not None
        assert torch.equal(latest.weights["w"], torch.arange(12, dtype=torch.float32).reshape(3, 4))
    finally:
        if sender.poll() is None:
            sender.kill()
        sender.communicate()  # closes the pipes


@pytest.mark.gpu
def test_nccl_push_between_two_gpus_equals_the_gloo_one() -> None:
    """Run by ``scripts/gpu_check.py --async`` on a machine with two GPUs or more."""
    if torch.cuda.device_count() < 2:
        pytest.skip("NCCL joins processes on different GPUs: needs 2 (one GPU: the push uses gloo)")
    code = RECEIVER.replace('"gloo"', '"nccl"').replace('torch.device("cpu")', 'torch.device("cuda")')
    push = PushHandoff("nccl", generators=1, device=torch.device("cuda", 0))
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"nccl-push-{os.getpid()}"
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "1"}
    proc = subprocess.Popen([sys.executable, "-c", code, push.address, "0", str(out), "4"], env=env)
    try:
        push.publish_path(0, "/base")
        weights = {k: v.cuda() for k, v in _weights(4).items()}
        push.publish(4, lambda d: None, lambda: iter(weights.items()))
        assert proc.wait(timeout=300) == 0
        got = load_file(str(out / "g0-v4.safetensors"))
        for name, value in _weights(4).items():
            assert torch.equal(got[name], value), name
    finally:
        if proc.poll() is None:
            proc.kill()
        push.close()
