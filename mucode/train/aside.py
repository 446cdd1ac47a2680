"""The trainer's state steps aside while the engine generates, and comes back bit-identical.

At a stage boundary the engine may use (almost) all of the device's memory because the trainer does
not need its state until the next update: before generation its gradients are dropped and its
parameters (unless the engine shares them: the single-process ``hf`` engine) and optimizer state are
copied, byte for byte, to host memory (pinned on CUDA, so the copies run at PCIe speed) and their
device storage is freed; after generation the storage is allocated again and the bytes copied back.

Why host memory rather than "free, then reload from the stage-end checkpoint": (1) the round trip
is exact by construction (raw bytes, no serialisation, no dtype round trip); (2) it does not need a
stage-end checkpoint, which short stages skip (``train.weight_sync=memory``); (3) it costs a
PCIe copy (~1 s for the 21 GB per GPU of a 7B model's float32 master + AdamW state on 4 GPUs)
instead of a disk read of the whole checkpoint by every rank. The price is host memory:
state bytes per rank x ranks per node, pinned.

How: storages are resized in place (``UntypedStorage.resize_``), as FSDP itself frees unsharded
parameters, so every tensor, view and FSDP flat-parameter bookkeeping that points at a storage stays
valid; tensors sharing a storage (tied embeddings, FSDP's original-parameter views) are parked once.
Tensors whose storage cannot be resized (loaded from a checkpoint or a memory-mapped file) are
given memory of their own first (once). Limits: buffers (rotary tables) stay on the device.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import torch
from torch import nn

__all__ = ["ParkedState", "held_bytes", "step_aside"]


def _fsdp_flat_params(model: nn.Module) -> list[torch.Tensor]:
    """FSDP1's flat parameters (with ``use_orig_params`` they are not in ``model.parameters()``)."""
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP  # lazy: torch
    except ImportError:  # pragma: no cover - torch without distributed
        return []
    flats = []
    for module in FSDP.fsdp_modules(model):
        handle = getattr(module, "_handle", None)
        if handle is not None and handle.flat_param is not None:
            flats.append(handle.flat_param)
    return flats


def _param_tensors(model: nn.Module) -> list[torch.Tensor]:
    return [*_fsdp_flat_params(model), *model.parameters()]


def _optimizer_tensors(optimizer: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [v for state in optimizer.state.values() for v in state.values() if isinstance(v, torch.Tensor)]


def _unique_storages(tensors: Iterable[torch.Tensor]) -> list[tuple[torch.UntypedStorage, torch.device]]:
    seen: set[int] = set()
    out = []
    for t in tensors:
        storage = t.untyped_storage()
        if storage.nbytes() == 0 or storage.data_ptr() in seen:
            continue
        seen.add(storage.data_ptr())
        out.append((storage, t.device))
    return out


def _bytes_view(storage: torch.UntypedStorage, device: torch.device, nbytes: int) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8, device=device).set_(storage, 0, (nbytes,), (1,))


def held_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """Bytes of storage the trainer holds now: ``params``, ``grads`` and ``optimizer`` state."""
    grads = [p.grad for p in _param_tensors(model) if p.grad is not None]
    return {
        "params": sum(s.nbytes() for s, _ in _unique_storages(_param_tensors(model))),
        "grads": sum(s.nbytes() for s, _ in _unique_storages(grads)),
        "optimizer": sum(s.nbytes() for s, _ in _unique_storages(_optimizer_tensors(optimizer))),
    }


@dataclass
class ParkedState:
    """Host copies of freed storages; :meth:`restore` puts every byte back."""

    entries: list[tuple[torch.UntypedStorage, torch.device, torch.Tensor]] = field(default_factory=list)
    parked_bytes: int = 0

    def extend(self, other: ParkedState) -> None:
        """Take over ``other``'s parked storages (restored together)."""
        self.entries += other.entries
        self.parked_bytes += other.parked_bytes
        other.entries = []

    def restore(self) -> None:
        devices = set()
        for storage, device, host in self.entries:
            storage.resize_(host.numel())
            _bytes_view(storage, device, host.numel()).copy_(host, non_blocking=True)
            devices.add(device)
        for device in devices:
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        self.entries = []


def _own_memory(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    """Give tensors that do not own their memory (loaded from a checkpoint or a safetensors file, which
    may map the file) a copy of their own, once: such a storage cannot be freed in place."""
    for state in optimizer.state.values():
        for key, value in state.items():
            if isinstance(value, torch.Tensor) and not value.untyped_storage().resizable():
                state[key] = value.clone()
    for p in model.parameters():
        if (
            not p.untyped_storage().resizable()
            and p.untyped_storage().nbytes() == p.numel() * p.element_size()
        ):
            p.data = p.data.clone()


def step_aside(model: nn.Module, optimizer: torch.optim.Optimizer, *, params: bool = True) -> ParkedState:
    """Drop the gradients and park the optimizer state (and the parameters when ``params``) in host
    memory, freeing their device storage. ``params=False`` when an engine computes with them."""
    optimizer.zero_grad(set_to_none=True)
    for p in _param_tensors(model):
        p.grad = None
    _own_memory(model, optimizer)
    tensors = _optimizer_tensors(optimizer) + (_param_tensors(model) if params else [])
    parked = ParkedState()
    for storage, device in _unique_storages(tensors):
        if not storage.resizable():
            raise RuntimeError(
                "a trainer tensor does not own its memory (a memory-mapped load) and cannot step aside; "
                "load the policy with mucode.train.policy.load_policy"
            )
        nbytes = storage.nbytes()
        host = torch.empty(nbytes, dtype=torch.uint8, pin_memory=device.type == "cuda")
        host.copy_(_bytes_view(storage, device, nbytes))
        storage.resize_(0)
        parked.entries.append((storage, device, host))
        parked.parked_bytes += nbytes
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return parked
