"""Sandbox backends are looked up in the one Registry type: plug-ins register, unknown names and
options are refused in one line naming the valid ones, and the verifier settings check the name at
load time. Builds backends without starting them (no Docker, no root)."""

from __future__ import annotations

import uuid

import pytest
from pydantic import ValidationError

from mucode.registry import DuplicateNameError, UnknownNameError
from mucode.sandbox import SANDBOX_BACKENDS, make_backend, production_backend_names, register_backend
from mucode.sandbox.fake import FakeBackend
from mucode.verifier.settings import VerifierSettings


class _Echo(FakeBackend):
    name = "echo"

    def __init__(self, *, verdict: str = "correct") -> None:
        super().__init__(default=verdict)


def test_a_registered_backend_is_built_by_name_and_offered_to_users() -> None:
    name = f"zz-echo-{uuid.uuid4().hex[:6]}"  # sorts after the built-ins other tests list
    register_backend(name, _Echo)
    assert name in production_backend_names()
    assert isinstance(make_backend(name, verdict="wrong_answer"), _Echo)
    assert VerifierSettings(backend=name).backend == name
    with pytest.raises(DuplicateNameError):
        register_backend(name, _Echo)


def test_unknown_names_and_options_name_the_valid_ones() -> None:
    with pytest.raises(UnknownNameError, match="valid names: attach, docker, fake, local"):
        make_backend("k8s")
    with pytest.raises(ValidationError, match="unknown sandbox backend 'k8s'"):
        VerifierSettings(backend="k8s")
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['pool_size'\].*slots_per_container"):
        make_backend("docker", pool_size=8)
    # the pre-split spelling of compose's attach mode says where it went
    with pytest.raises(ValueError, match="`attach` backend: MUCODE_BACKEND=attach"):
        make_backend("docker", socket_dir="/run/mucode")
    with pytest.raises(ValueError, match="needs socket_dir"):
        make_backend("attach", socket_dir="")


def test_builtin_entries_are_imported_only_when_built() -> None:
    entry = SANDBOX_BACKENDS.get("docker")
    assert entry.target == "mucode.sandbox.docker:DockerPoolBackend" and entry.production
    assert not SANDBOX_BACKENDS.get("fake").production
