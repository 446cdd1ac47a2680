"""LiveCodeBench prompts, as its runner builds them (`lcb_runner/prompts/code_generation.py`, current text).

Styles (LiveCodeBench's `LMStyle` names are accepted too):
- `chat` (`OpenAIChat`, also what LiveCodeBench uses for DeepSeek, Together and Cohere APIs): the
  system message `SYSTEM_MESSAGE_GENERIC` and the user message "### Question: … ### Format: … ###
  Answer: …"; the engine applies the model's chat template;
- `codeqwen` (`CodeQwenInstruct`, LiveCodeBench's style for Qwen2.5-Coder-*-Instruct): one raw text
  prompt holding ChatML markers itself, as there (no chat template is applied on top);
- `base` (`GenericBase`, base models): "### Question / ### Starter Code / ### Answer" after
  LiveCodeBench's own first few-shot example (`few_shot_examples/generation/{stdin,func}.json`,
  shipped in `eval/livecodebench`, installed as `mucode.eval.data`), which the model continues.

`LCB_STOP` is the runner's default stop list (`--stop ###`), used with every style.
The texts follow the revision after 2024-12-26 (the system message no longer ends "You will NOT
return anything except for the program."; the stdin format line gained "Ensure that when the python
program runs, it reads the inputs, runs the algorithm and writes output to STDOUT."). The tests
compare every style with the installed `livecodebench` package's `format_prompt_generation`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

from mucode.eval.data import LIVECODEBENCH_DATA_DIR
from mucode.eval.livecodebench.data import LCBProblem

__all__ = [
    "FORMATTING_MESSAGE_WITH_STARTER_CODE",
    "FORMATTING_WITHOUT_STARTER_CODE",
    "LCB_STOP",
    "PROMPT_STYLES",
    "SYSTEM_MESSAGE_GENERIC",
    "Prompt",
    "build_prompt",
    "generic_question_template",
    "prompt_style_name",
]

SYSTEM_MESSAGE_GENERIC = (
    "You are an expert Python programmer. You will be given a question (problem specification) and will "
    "generate a correct Python program that matches the specification and passes all tests."
)
SYSTEM_MESSAGE_CODEQWEN = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user"
FORMATTING_MESSAGE_WITH_STARTER_CODE = (
    "You will use the following starter code to write the solution to the problem and enclose your code "
    "within delimiters."
)
FORMATTING_WITHOUT_STARTER_CODE = (
    "Read the inputs from stdin solve the problem and write the answer to stdout (do not directly test on "
    "the sample inputs). Enclose your code within delimiters as follows. Ensure that when the python "
    "program runs, it reads the inputs, runs the algorithm and writes output to STDOUT."
)
_TASK = (
    "You will be given a question (problem specification) and will generate a correct Python program that "
    "matches the specification and passes all tests. You will NOT return anything except for the program.\n\n"
)
LCB_STOP: tuple[str, ...] = ("###",)
"""LiveCodeBench's runner stops generation at these strings (its `--stop` default)."""

Prompt = str | list[dict[str, str]]
"""A raw text prompt or chat messages (the engine applies the chat template)."""


def generic_question_template(problem: LCBProblem) -> str:
    """LiveCodeBench's user message for chat models (`get_generic_question_template_answer`)."""
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


def _codeqwen(problem: LCBProblem) -> Prompt:
    prompt = f"{SYSTEM_MESSAGE_CODEQWEN}\n\n{_TASK}Question: {problem.content}\n\n"
    if problem.starter_code:
        prompt += (
            f"{FORMATTING_MESSAGE_WITH_STARTER_CODE}\n```python\n{problem.starter_code}\n```\n\n<|im_end|>\n"
        )
    else:
        prompt += f"{FORMATTING_WITHOUT_STARTER_CODE}\n```python\n# YOUR CODE HERE\n```\n\n<|im_end|>\n"
    return prompt + "<|im_start|>assistant\n"


@functools.cache
def _few_shot() -> dict[str, dict[str, str]]:
    path = LIVECODEBENCH_DATA_DIR / "few_shot_generation.json"
    return json.loads(path.read_text(encoding="utf-8"))


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
    example = _few_shot()["func" if with_starter else "stdin"]
    return _base_block(
        example["question"], example.get("sample_code", ""), example["answer"], with_starter
    ) + _base_block(problem.content, problem.starter_code, "", with_starter)


PROMPT_STYLES: dict[str, Callable[[LCBProblem], Prompt]] = {
    "chat": _chat,
    "codeqwen": _codeqwen,
    "base": _base,
}
"""Style name → prompt builder."""
_UPSTREAM_NAMES = {"OpenAIChat": "chat", "CodeQwenInstruct": "codeqwen", "GenericBase": "base"}


def prompt_style_name(style: str) -> str:
    """mucode's name of a style given in either spelling (`codeqwen` or `CodeQwenInstruct`)."""
    name = _UPSTREAM_NAMES.get(style, style)
    if name not in PROMPT_STYLES:
        valid = ", ".join(f"{n} ({u})" for u, n in _UPSTREAM_NAMES.items())
        raise ValueError(f"unknown prompt style {style!r}; valid: {valid}")
    return name


def build_prompt(problem: LCBProblem, style: str = "chat") -> Prompt:
    """The prompt for one problem in a registered style."""
    return PROMPT_STYLES[prompt_style_name(style)](problem)
