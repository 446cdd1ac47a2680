"""Finding reward programs through the mucode.rewards entry-point group."""

from __future__ import annotations

import pytest

from mucode.rewards.code import CodeReward
from mucode.rewards.math import MathReward
from mucode.rewards.registry import ProgramRegistry, UnknownProgramError, load_programs
from mucode.rewards.types import RewardProgram


def test_builtins_load_through_entry_points() -> None:
    registry = load_programs()
    assert {"code", "math"} <= set(registry.names())
    assert isinstance(registry.get("code"), CodeReward)
    assert isinstance(registry.get("math"), MathReward)
    assert isinstance(registry.get("math"), RewardProgram)
    assert registry.needs() >= {"sandbox", "math"}


def test_only_loads_the_named_programs() -> None:
    registry = load_programs(["math"])
    assert registry.names() == ("math",)
    assert registry.needs() == {"math"}


def test_unknown_program_names_the_available_ones() -> None:
    with pytest.raises(UnknownProgramError) as err:
        load_programs(["nope"])
    assert "unknown reward program 'nope'" in str(err.value) and "math" in str(err.value)
    with pytest.raises(UnknownProgramError, match="valid names: math"):
        load_programs(["math"]).get("code")


def test_duplicate_and_malformed_programs_are_rejected() -> None:
    registry = ProgramRegistry({"math": MathReward()})
    with pytest.raises(ValueError, match="already registered"):
        registry.add("math", MathReward())
    with pytest.raises(TypeError, match="no async score"):
        registry.add("broken", object())  # type: ignore[arg-type]
