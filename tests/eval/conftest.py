"""Shared fixtures of the evaluator tests: the offline math data and one in-process verifier."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from mucode.eval.data import MATH_DATA_DIR as MATH_DATA  # the copies shipped with mucode

from mucode.eval.judge import VerifierOptions, verifier_base_urls

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"


@pytest.fixture(scope="session")
def math_data() -> Path:
    assert MATH_DATA.is_dir(), f"{MATH_DATA} is missing: the package ships the math benchmarks there"
    return MATH_DATA


@pytest.fixture
def hub_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """huggingface_hub refuses every request (tests never reach the network)."""
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)


@pytest.fixture(scope="session")
def math_verifier() -> Iterator[VerifierOptions]:
    """One loopback verifier serving the math program for the whole session."""
    with verifier_base_urls(VerifierOptions(local_options={"math_workers": 2}), ["math"]) as urls:
        yield VerifierOptions(urls=urls)


@pytest.fixture(scope="session")
def code_verifier() -> Iterator[VerifierOptions]:
    """One loopback verifier serving the code program (local sandbox backend) for the whole session."""
    with verifier_base_urls(VerifierOptions(backend="local"), ["code"]) as urls:
        yield VerifierOptions(urls=urls)
