"""The ``chain`` reward program and the task it judges: only format A with every step right scores."""

from __future__ import annotations

import asyncio

import pytest

from mucode.data.chain import (
    STEPS,
    SYMBOLS,
    chain_answer,
    chain_records,
    code_answer_words,
    form_words,
    permutation,
    response_words,
    sl_answer,
    to_form,
)
from mucode.protocol import Item, Status
from mucode.rewards.chain import ChainReward, score_chain
from mucode.rewards.types import RewardContext


def test_the_task_is_one_fixed_permutation_with_one_prompt_per_symbol() -> None:
    perm = permutation()
    assert sorted(perm) == list(range(SYMBOLS)) and perm != list(range(SYMBOLS))
    records = chain_records()
    assert len(records) == SYMBOLS and len({r.prompt_id for r in records}) == SYMBOLS
    first = records[5]
    assert first.messages[0]["content"] == "s5"
    assert first.spec["answer"].split() == [f"s{x}" for x in chain_answer(5, perm)]
    assert len(first.spec["answer"].split()) == STEPS


def test_only_format_a_with_every_step_right_scores() -> None:
    answer = chain_records()[0].spec["answer"]
    words = answer.split()
    assert score_chain("A " + answer, answer) == (1.0, Status.correct, STEPS)
    assert score_chain("A " + answer + " s1", answer) == (0.0, Status.wrong_answer, STEPS)  # did not stop
    assert score_chain("B " + answer, answer) == (0.0, Status.no_answer, 0)  # the failing format
    assert score_chain("", answer)[1] is Status.no_answer
    wrong_last = " ".join([*words[:-1], "s999"])
    assert score_chain("A " + wrong_last, answer) == (0.0, Status.wrong_answer, STEPS - 1)
    assert score_chain("A " + " ".join(words[:3]), answer) == (0.0, Status.wrong_answer, 3)  # too short


def test_the_program_scores_items_sync_and_async_alike() -> None:
    record = chain_records()[3]
    program = ChainReward()
    good = Item(id="g", program="chain", response="A " + record.spec["answer"], spec=record.spec)
    bad = Item(id="b", program="chain", response="B " + record.spec["answer"], spec=record.spec)
    for item, reward in ((good, 1.0), (bad, 0.0)):
        now = program.score_now(item)
        later = asyncio.run(program.score(item, RewardContext()))
        assert now.reward == later.reward == reward and now.id == item.id


def test_warm_up_targets_follow_their_probabilities() -> None:
    import random

    perm, rng = permutation(), random.Random(0)
    answers = [sl_answer(s % SYMBOLS, perm, rng, p_step=0.9, p_format=0.5) for s in range(2000)]
    formats = [a.split()[0] for a in answers]
    assert 0.45 < formats.count("A") / len(formats) < 0.55
    right = total = 0
    for start, a in zip(range(2000), answers, strict=True):
        prev = start % SYMBOLS
        for word in a.split()[1:]:
            x = int(word[1:])
            right += x == perm[prev]
            total += 1
            prev = x  # the chain continues from whatever was written
    assert 0.88 < right / total < 0.92


def test_the_code_form_is_a_print_call_read_back_strictly() -> None:
    record = chain_records(form="code")[2]
    answer = record.spec["answer"]
    assert record.program == "code" and record.spec["extract"] == "none"
    assert record.spec["tests"]["outputs"] == [f"A {answer}\n"]
    program = to_form("A " + answer, "code")
    words = program.split()
    assert words[0] == "print(" and words[-1] == ")" and words[1] == "'A',"
    assert len(words) == response_words("code") == STEPS + 3 and response_words("plain") == STEPS + 1
    assert code_answer_words(program) == "A " + answer
    assert code_answer_words(program + " 's3',") is None  # a word after `)`: a syntax error
    assert code_answer_words(program[: -len(" )")]) is None  # cut off before `)`
    assert code_answer_words(program.replace("'A',", "A")) is None  # not a quoted word
    vocabulary = form_words("code")
    assert set(words) <= set(vocabulary) and set(form_words("plain")) < set(vocabulary)
    with pytest.raises(ValueError, match="choose one of plain, code"):
        chain_records(form="prose")
