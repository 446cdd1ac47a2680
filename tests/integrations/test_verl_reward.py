"""verl's reward-function signature on top of the verifier session, loaded the way verl loads it.

verl imports ``reward.custom_reward_function.path`` by file path (``spec_from_file_location``), so
these tests load ``mucode/integrations/verl/reward.py`` the same way, and check that doing so does
not import verl or register mucode's losses there (``mucode.integrations.verl.__init__`` does that).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import mucode.integrations
from mucode.verifier.local import local_verifier
from mucode.verifier.samples import to_item

REWARD_FILE = Path(mucode.integrations.__file__).parent / "verl" / "reward.py"


def _load_by_path() -> ModuleType:
    spec = importlib.util.spec_from_file_location("custom_module_mucode_test", REWARD_FILE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def reward() -> Iterator[ModuleType]:
    module = _load_by_path()
    yield module
    module.close()


@pytest.fixture(scope="module")
def math_url() -> Iterator[str]:
    with local_verifier(
        "local", programs=["math", "exact_match"], run_code=False, math_workers=1, math_timeout_s=5.0
    ) as url:
        yield url


def test_loading_the_file_imports_neither_verl_nor_the_loss_registration() -> None:
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('custom_module_x', {str(REWARD_FILE)!r})\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "assert callable(m.compute_score) and callable(m.compute_score_batch)\n"
        "bad = sorted(n for n in sys.modules if n == 'verl' or n.startswith(('verl.', 'mucode.integrations.verl.register', 'mucode.integrations.verl.losses')))\n"  # noqa: E501
        "print('LOADED', bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "LOADED []" in out.stdout, out.stdout


def test_samples_map_to_items() -> None:
    assert to_item("math500", "r", "\\frac12", None).program == "math"
    code = to_item("cc", "r", json.dumps({"inputs": ["1\n"], "outputs": ["1\n"]}), {"index": 7})
    assert code.id == "7" and code.spec["tests"]["format"] == "stdio"
    call = to_item("lcb", "r", {"inputs": ["1"], "outputs": ["1"], "fn_name": "f"}, None)
    assert call.spec["tests"] == {"format": "call", "inputs": ["1"], "outputs": ["1"], "fn_name": "f"}
    plugin = to_item("x", "r", "gt", {"mucode": {"program": "exact_match", "spec": {"answer": "a"}}})
    assert plugin.program == "exact_match" and plugin.spec == {"answer": "a"}


def test_compute_score_through_the_service(
    reward: ModuleType, math_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MUCODE_VERIFIER_URL", math_url)
    assert reward.compute_score("math500", "so \\boxed{0.5}", "\\frac{1}{2}", {}) == {
        "score": 1.0,
        "acc": True,
        "status": "correct",
    }
    out = reward.compute_score_batch(
        ["a", "b"],
        ["\\boxed{3}", "Answer: x"],
        ["4", "x"],
        [None, {"mucode": {"program": "exact_match", "spec": {"answer": "x"}}}],
    )
    assert [o["status"] for o in out] == ["wrong_answer", "correct"]


def test_infrastructure_failure_raises_instead_of_scoring_zero(
    reward: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MUCODE_VERIFIER_URL", raising=False)
    with pytest.raises(reward.VerifierUnavailableError, match="MUCODE_VERIFIER_URL"):
        reward.compute_score("math500", "\\boxed{1}", "1", {})
