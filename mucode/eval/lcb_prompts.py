"""LiveCodeBench prompts: its chat layout (default) and its base-model layout.

`chat` is LiveCodeBench's `OpenAIChat` style (lcb_runner/prompts/code_generation.py,
`format_prompt_generation`): the system prompt `SYSTEM_MESSAGE_GENERIC` and the user message of
`get_generic_question_template_answer` ("### Question: … ### Format: … ### Answer: …"), verbatim.
The model's chat template is applied by the rollout engine.

`base` follows LiveCodeBench's `GenericBase` layout ("### Question / ### Starter Code / ### Answer",
one worked example before the problem). Deviation: LiveCodeBench takes its worked example from
`few_shot_examples/generation/{stdin,func}.json`, which are not reproduced here; the examples below
are our own, of the same shape. Scores with `base` are therefore close to, not identical with,
LiveCodeBench's base-model numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from mucode.eval.lcb_data import LCBProblem

__all__ = [
    "FORMATTING_MESSAGE_WITH_STARTER_CODE",
    "FORMATTING_WITHOUT_STARTER_CODE",
    "PROMPT_STYLES",
    "SYSTEM_MESSAGE_GENERIC",
    "Prompt",
    "PromptStyle",
    "build_prompt",
    "generic_question_template",
]

SYSTEM_MESSAGE_GENERIC = (
    "You are an expert Python programmer. You will be given a question (problem specification) and will "
    "generate a correct Python program that matches the specification and passes all tests. You will NOT "
    "return anything except for the program."
)
FORMATTING_MESSAGE_WITH_STARTER_CODE = (
    "You will use the following starter code to write the solution to the problem and enclose your code "
    "within delimiters."
)
FORMATTING_WITHOUT_STARTER_CODE = (
    "Read the inputs from stdin solve the problem and write the answer to stdout (do not directly test on "
    "the sample inputs). Enclose your code within delimiters as follows."
)

PromptStyle = Literal["chat", "base"]
Prompt = str | list[dict[str, str]]
"""A raw text prompt (base models) or chat messages (the engine applies the chat template)."""


def generic_question_template(problem: LCBProblem) -> str:
    """LiveCodeBench's user message for chat models."""
    prompt = f"### Question:\n{problem.content}\n\n"
    if problem.starter_code:
        prompt += f"### Format: {FORMATTING_MESSAGE_WITH_STARTER_CODE}\n"
        prompt += f"```python\n{problem.starter_code}\n```\n\n"
    else:
        prompt += f"### Format: {FORMATTING_WITHOUT_STARTER_CODE}\n"
        prompt += "```python\n# YOUR CODE HERE\n```\n\n"
    prompt += "### Answer: (use the provided format with backticks)\n\n"
    return prompt


def _chat(problem: LCBProblem) -> Prompt:
    return [
        {"role": "system", "content": SYSTEM_MESSAGE_GENERIC},
        {"role": "user", "content": generic_question_template(problem)},
    ]


_STDIN_EXAMPLE = {
    "question": (
        "You are given two integers A and B on one line. Print their sum.\n\nInput\n\nA B\n\nOutput\n\n"
        "Print A + B.\n\nSample Input 1\n\n3 5\n\nSample Output 1\n\n8"
    ),
    "sample_code": "",
    "answer": "```python\na, b = map(int, input().split())\nprint(a + b)\n```",
}
_FUNC_EXAMPLE = {
    "question": (
        "You are given a 0-indexed integer array nums. Return the largest element of nums.\n\n"
        "Example 1:\n\nInput: nums = [3,1,4]\nOutput: 4"
    ),
    "sample_code": "class Solution:\n    def largest(self, nums: List[int]) -> int:\n        ",
    "answer": "```python\nclass Solution:\n    def largest(self, nums: List[int]) -> int:\n        return max(nums)\n```",
}


def _base_block(question: str, sample_code: str, answer: str, with_starter: bool) -> str:
    block = f"### Question\n{question}\n\n"
    if with_starter:
        block += f"### Starter Code\n{sample_code}\n\n"
    block += "### Answer\n\n" + answer
    if answer:
        block += "\n\n"
    return block


def _base(problem: LCBProblem) -> Prompt:
    with_starter = bool(problem.starter_code)
    example = _FUNC_EXAMPLE if with_starter else _STDIN_EXAMPLE
    return _base_block(
        example["question"], example["sample_code"], example["answer"], with_starter
    ) + _base_block(problem.content, problem.starter_code, "", with_starter)


PROMPT_STYLES: dict[str, Callable[[LCBProblem], Prompt]] = {"chat": _chat, "base": _base}


def build_prompt(problem: LCBProblem, style: str = "chat") -> Prompt:
    """The prompt for one problem in a registered style (`chat` or `base`)."""
    try:
        return PROMPT_STYLES[style](problem)
    except KeyError:
        raise ValueError(f"unknown prompt style {style!r}; valid: {', '.join(PROMPT_STYLES)}") from None
