"""Named protocols: the settings published numbers depend on, looked up by name."""

from __future__ import annotations

import pytest

from mucode.eval.benchmarks import BENCHMARKS, get_protocol, protocol_names
from mucode.eval.generate import cut_at_stop
from mucode.eval.math_bench import MathProblem, MathTask
from mucode.eval.protocols import math_template


def test_math_paper_protocol_is_the_paper_plus_m2po_validation() -> None:
    paper = get_protocol("math")  # the default
    assert paper.name == "paper" and paper.prompt == "m2po"
    assert (paper.sampling.temperature, paper.sampling.top_p, paper.sampling.max_new_tokens) == (
        1.0,
        0.7,
        6656,
    )
    assert get_protocol("math", "paper", context_tokens=4096).sampling.max_new_tokens == 2560
    assert get_protocol("math", "paper", context_tokens=8192).sampling.max_new_tokens == 6656
    assert [paper.samples_for(b) for b in ("aime24", "aime25", "math500", "amc23", "amc24")] == [
        16,
        16,
        4,
        4,
        4,
    ]
    with pytest.raises(ValueError, match="4096, 8192"):
        get_protocol("math", "paper", context_tokens=2048)


def test_m2po_template_renders_its_prompt_exactly() -> None:
    task = MathTask("amc23", [MathProblem("1", "What is $1+1$?", 2)], template=math_template("m2po"))
    assert task.problems[0].prompt == [
        {
            "role": "user",
            "content": "Please solve the following math problem: What is $1+1$?. The assistant first thinks about the "
            "reasoning process step by step and then provides the user with the answer. Return the final answer in "
            "\\boxed{} tags, for example \\boxed{1}. Let's solve this step by step. ",
        }
    ]
    boxed = MathTask("amc23", [MathProblem("1", "What is $1+1$?\n", 2)], template=math_template("boxed"))
    assert boxed.problems[0].prompt[0]["content"] == (
        "What is $1+1$? Let's think step by step and output the final answer within \\boxed{}."
    )


def test_livecodebench_protocols() -> None:
    paper = get_protocol("livecodebench")
    assert paper.samples_for("livecodebench") == 4 and paper.sampling.max_new_tokens == 6656
    assert paper.sampling.stop == ("###",) and paper.release == "release_latest"
    upstream = get_protocol("livecodebench", "livecodebench")
    s = upstream.sampling
    assert (s.temperature, s.top_p, s.max_new_tokens, s.stop) == (0.2, 0.95, 2000, ("###",))
    assert upstream.samples_for("livecodebench") == 10
    with pytest.raises(ValueError, match="fixed response budget"):
        upstream.with_context(8192)


def test_unknown_names_list_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="valid: paper, boxed"):
        get_protocol("math", "nope")
    with pytest.raises(ValueError, match="valid: m2po, boxed"):
        math_template("nope")
    assert set(protocol_names("evalplus")) == {"evalplus"}
    assert all(p.source for _, bench in BENCHMARKS.items() for p in bench.protocols)


def test_stop_strings_cut_the_response_before_the_first_one() -> None:
    assert cut_at_stop("code\n### Explanation\nmore ###", ("###",)) == "code\n"
    assert cut_at_stop("a STOP b END", ("END", "STOP")) == "a "
    assert cut_at_stop("no stop here", ("###",)) == "no stop here"
    assert cut_at_stop("text", ()) == "text"


def test_command_line_overrides_replace_single_fields() -> None:
    from mucode.cli.eval import resolve_protocol

    chosen = resolve_protocol("livecodebench", None, None, temperature=0.5, top_p=None, stop=())
    assert chosen.sampling.temperature == 0.5 and chosen.sampling.top_p == 0.7 and chosen.sampling.stop == ()
    assert chosen.samples_for("livecodebench") == 4 and chosen.name == "paper"
