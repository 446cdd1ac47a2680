"""The built-in toy tasks (``load_tasks("toy", task)``), one per kind, small enough for a tiny policy.

- ``math``: integer arithmetic ``What is a + b?`` / ``a - b`` / ``a * b`` with operands below 13,
  answered ``\\boxed{c}`` and checked by the ``math`` reward program (math-verify). 507 problems;
  every tenth one (by a fixed hash) is the ``test`` split, the rest ``train``.
- ``code``: 24 tiny stdin/stdout programs (sum of two integers, reverse a line, ...), each asked
  in three phrasings; the third phrasing of every program is the ``test`` split. Five stdio tests
  each, checked in the sandbox by the ``code`` reward program.

Each problem also carries a correct response and typical wrong ones (``toy_problems``), and
``unformatted`` turns a response into one the reward programs cannot read (math: the answer
without ``\\boxed{}``; code: the program without its code fence). ``scripts/make_tiny_policy.py``
mixes all of these into the warm-up data, so the tiny policy starts with a low but non-zero reward
that RL can raise quickly by learning the format, then the answers.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass

from mucode.data.schemas import CODE_INSTRUCTION, MATH_INSTRUCTION
from mucode.data.types import TaskKind, TaskRecord

MATH_MAX_OPERAND = 12
CODE_TESTS_PER_PROBLEM = 5


@dataclass(frozen=True)
class ToyProblem:
    record: TaskRecord
    correct: str
    """A response the reward program scores 1."""
    wrong: tuple[str, ...]
    """Responses it scores 0."""


def unformatted(task: TaskKind, response: str) -> str:
    """``response`` in a form its reward program scores 0 (no boxed answer / no code fence)."""
    if task == "math":
        return response.replace("\\boxed{", "").replace("}.", ".")
    return response.removeprefix("```python\n").removesuffix("\n```")


def _math_response(value: int) -> str:
    return f"The answer is \\boxed{{{value}}}."


def _math_problems(instruction: str) -> list[tuple[str, ToyProblem]]:
    ops: dict[str, Callable[[int, int], int]] = {
        "+": lambda a, b: a + b,
        "-": lambda a, b: a - b,
        "*": lambda a, b: a * b,
    }
    problems = []
    for symbol, fn in ops.items():
        for a in range(MATH_MAX_OPERAND + 1):
            for b in range(MATH_MAX_OPERAND + 1):
                answer = fn(a, b)
                prompt_id = f"toy-math-{a}{symbol}{b}"
                split = "test" if zlib.crc32(prompt_id.encode()) % 10 == 0 else "train"
                wrong_values = sorted(
                    {answer + d for d in (-2, -1, 1, 2, 10)}
                    | {fn(b, a) + 1, a + b + 1 if symbol != "+" else a * b}
                )
                wrong_values = [v for v in wrong_values if v != answer]
                record = TaskRecord(
                    prompt_id=prompt_id,
                    messages=[
                        {"role": "user", "content": f"What is {a} {symbol} {b}? {instruction}".rstrip()}
                    ],
                    program="math",
                    spec={"answer": str(answer)},
                    meta={"source": "toy", "a": a, "b": b, "op": symbol},
                )
                problems.append(
                    (
                        split,
                        ToyProblem(
                            record, _math_response(answer), tuple(_math_response(v) for v in wrong_values)
                        ),
                    )
                )
    return problems


@dataclass(frozen=True)
class _Program:
    name: str
    phrasings: tuple[str, str, str]
    correct: str
    wrong: tuple[str, ...]
    make_input: Callable[[random.Random], str]
    solve: Callable[[str], str]


def _two_ints(rng: random.Random) -> str:
    return f"{rng.randint(-20, 50)} {rng.randint(1, 30)}\n"


def _one_int(rng: random.Random) -> str:
    return f"{rng.randint(-30, 60)}\n"


def _pos_int(rng: random.Random) -> str:
    return f"{rng.randint(1, 12)}\n"


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))) + "\n"


def _words(rng: random.Random) -> str:
    return " ".join(_word(rng).strip() for _ in range(rng.randint(1, 6))) + "\n"


def _int_list(rng: random.Random) -> str:
    return " ".join(str(rng.randint(-50, 99)) for _ in range(rng.randint(2, 8))) + "\n"


def _ab(s: str) -> tuple[int, int]:
    a, b = map(int, s.split())
    return a, b


READ_AB = "a, b = map(int, input().split())\n"
READ_N = "n = int(input())\n"
READ_S = "s = input()\n"
READ_XS = "xs = list(map(int, input().split()))\n"

_PROGRAMS: tuple[_Program, ...] = (
    _Program(
        "sum2",
        (
            "Print the sum of the two integers on the input line.",
            "Read two integers a and b and output a + b.",
            "Given two integers on one line, print their sum.",
        ),
        READ_AB + "print(a + b)",
        (READ_AB + "print(a - b)", READ_AB + "print(a * b)", "print(input())"),
        _two_ints,
        lambda s: str(sum(_ab(s))),
    ),
    _Program(
        "diff2",
        (
            "Print the first integer minus the second; both are on one input line.",
            "Read two integers a and b and output a - b.",
            "Given two integers on one line, print their difference a - b.",
        ),
        READ_AB + "print(a - b)",
        (READ_AB + "print(b - a)", READ_AB + "print(a + b)"),
        _two_ints,
        lambda s: str(_ab(s)[0] - _ab(s)[1]),
    ),
    _Program(
        "prod2",
        (
            "Print the product of the two integers on the input line.",
            "Read two integers a and b and output a * b.",
            "Given two integers on one line, print their product.",
        ),
        READ_AB + "print(a * b)",
        (READ_AB + "print(a + b)", READ_AB + "print(a ** b)"),
        _two_ints,
        lambda s: str(_ab(s)[0] * _ab(s)[1]),
    ),
    _Program(
        "max2",
        (
            "Print the larger of the two integers on the input line.",
            "Read two integers and output the maximum of them.",
            "Given two integers on one line, print the bigger one.",
        ),
        READ_AB + "print(max(a, b))",
        (READ_AB + "print(min(a, b))", READ_AB + "print(a)"),
        _two_ints,
        lambda s: str(max(_ab(s))),
    ),
    _Program(
        "min2",
        (
            "Print the smaller of the two integers on the input line.",
            "Read two integers and output the minimum of them.",
            "Given two integers on one line, print the smaller one.",
        ),
        READ_AB + "print(min(a, b))",
        (READ_AB + "print(max(a, b))", READ_AB + "print(b)"),
        _two_ints,
        lambda s: str(min(_ab(s))),
    ),
    _Program(
        "quot2",
        (
            "Print the integer quotient a // b of the two integers a and b on the input line.",
            "Read two integers a and b and output a // b.",
            "Given integers a and b on one line, print a divided by b rounded down.",
        ),
        READ_AB + "print(a // b)",
        (READ_AB + "print(a / b)", READ_AB + "print(a % b)"),
        _two_ints,
        lambda s: str(_ab(s)[0] // _ab(s)[1]),
    ),
    _Program(
        "mod2",
        (
            "Print the remainder a % b of the two integers a and b on the input line.",
            "Read two integers a and b and output a % b.",
            "Given integers a and b on one line, print a modulo b.",
        ),
        READ_AB + "print(a % b)",
        (READ_AB + "print(a // b)", READ_AB + "print(b % a)"),
        _two_ints,
        lambda s: str(_ab(s)[0] % _ab(s)[1]),
    ),
    _Program(
        "square",
        (
            "Read an integer n and print n squared.",
            "Output the square of the integer on the input line.",
            "Given an integer n, print n * n.",
        ),
        READ_N + "print(n * n)",
        (READ_N + "print(2 * n)", READ_N + "print(n ** 3)"),
        _one_int,
        lambda s: str(int(s) ** 2),
    ),
    _Program(
        "double",
        (
            "Read an integer n and print twice its value.",
            "Output two times the integer on the input line.",
            "Given an integer n, print 2 * n.",
        ),
        READ_N + "print(2 * n)",
        (READ_N + "print(n * n)", READ_N + "print(n + 2)"),
        _one_int,
        lambda s: str(2 * int(s)),
    ),
    _Program(
        "inc",
        (
            "Read an integer n and print n + 1.",
            "Output the integer on the input line plus one.",
            "Given an integer n, print the next integer.",
        ),
        READ_N + "print(n + 1)",
        (READ_N + "print(n - 1)", READ_N + "print(n)"),
        _one_int,
        lambda s: str(int(s) + 1),
    ),
    _Program(
        "dec",
        (
            "Read an integer n and print n - 1.",
            "Output the integer on the input line minus one.",
            "Given an integer n, print the previous integer.",
        ),
        READ_N + "print(n - 1)",
        (READ_N + "print(n + 1)", READ_N + "print(1 - n)"),
        _one_int,
        lambda s: str(int(s) - 1),
    ),
    _Program(
        "abs",
        (
            "Read an integer n and print its absolute value.",
            "Output the absolute value of the integer on the input line.",
            "Given an integer n, print |n|.",
        ),
        READ_N + "print(abs(n))",
        (READ_N + "print(-n)", READ_N + "print(n)"),
        _one_int,
        lambda s: str(abs(int(s))),
    ),
    _Program(
        "parity",
        (
            "Read an integer n and print even if it is even, otherwise odd.",
            "Output even or odd for the integer on the input line.",
            "Given an integer n, print whether it is even or odd (the word even or odd).",
        ),
        READ_N + "print('even' if n % 2 == 0 else 'odd')",
        (READ_N + "print('odd' if n % 2 == 0 else 'even')", READ_N + "print(n % 2)"),
        _one_int,
        lambda s: "even" if int(s) % 2 == 0 else "odd",
    ),
    _Program(
        "tri",
        (
            "Read a positive integer n and print 1 + 2 + ... + n.",
            "Output the sum of the integers from 1 to n, where n is on the input line.",
            "Given n, print the sum of all integers from 1 to n.",
        ),
        READ_N + "print(n * (n + 1) // 2)",
        (READ_N + "print(n * (n - 1) // 2)", READ_N + "print(n * n)"),
        _pos_int,
        lambda s: str(int(s) * (int(s) + 1) // 2),
    ),
    _Program(
        "count",
        (
            "Read a positive integer n and print the numbers 1 to n separated by spaces.",
            "Output 1 2 ... n on one line, where n is on the input line.",
            "Given n, print all integers from 1 to n on one line.",
        ),
        READ_N + "print(*range(1, n + 1))",
        (READ_N + "print(*range(n))", READ_N + "print(n)"),
        _pos_int,
        lambda s: " ".join(str(i) for i in range(1, int(s) + 1)),
    ),
    _Program(
        "reverse",
        (
            "Read a line and print it reversed.",
            "Output the input line backwards.",
            "Given a word, print its characters in reverse order.",
        ),
        READ_S + "print(s[::-1])",
        (READ_S + "print(s)", READ_S + "print(s[1:])"),
        _word,
        lambda s: s.strip()[::-1],
    ),
    _Program(
        "upper",
        (
            "Read a line and print it in upper case.",
            "Output the input line with every letter capitalised.",
            "Given a word, print it in capital letters.",
        ),
        READ_S + "print(s.upper())",
        (READ_S + "print(s.lower())", READ_S + "print(s.title())"),
        _word,
        lambda s: s.strip().upper(),
    ),
    _Program(
        "length",
        (
            "Read a line and print its length.",
            "Output the number of characters of the input line.",
            "Given a word, print how many letters it has.",
        ),
        READ_S + "print(len(s))",
        (READ_S + "print(len(s) - 1)", READ_S + "print(s)"),
        _word,
        lambda s: str(len(s.strip())),
    ),
    _Program(
        "twice",
        (
            "Read a word and print it twice with nothing between.",
            "Output the input word repeated two times.",
            "Given a word w, print w concatenated with itself.",
        ),
        READ_S + "print(s + s)",
        (READ_S + "print(s, s)", READ_S + "print(s)"),
        _word,
        lambda s: s.strip() * 2,
    ),
    _Program(
        "words",
        (
            "Read a line and print the number of words on it.",
            "Output how many space-separated words the input line has.",
            "Given a sentence, print its word count.",
        ),
        READ_S + "print(len(s.split()))",
        (READ_S + "print(len(s))", READ_S + "print(s.count(' '))"),
        _words,
        lambda s: str(len(s.split())),
    ),
    _Program(
        "first",
        (
            "Read a line of words and print the first word.",
            "Output the first space-separated word of the input line.",
            "Given a sentence, print its first word.",
        ),
        READ_S + "print(s.split()[0])",
        (READ_S + "print(s.split()[-1])", READ_S + "print(s[0])"),
        _words,
        lambda s: s.split()[0],
    ),
    _Program(
        "sumlist",
        (
            "Print the sum of the integers on the input line.",
            "Read a line of integers and output their total.",
            "Given several integers on one line, print their sum.",
        ),
        READ_XS + "print(sum(xs))",
        (READ_XS + "print(max(xs))", READ_XS + "print(len(xs))"),
        _int_list,
        lambda s: str(sum(map(int, s.split()))),
    ),
    _Program(
        "maxlist",
        (
            "Print the largest of the integers on the input line.",
            "Read a line of integers and output the maximum.",
            "Given several integers on one line, print the biggest.",
        ),
        READ_XS + "print(max(xs))",
        (READ_XS + "print(min(xs))", READ_XS + "print(xs[-1])"),
        _int_list,
        lambda s: str(max(map(int, s.split()))),
    ),
    _Program(
        "minlist",
        (
            "Print the smallest of the integers on the input line.",
            "Read a line of integers and output the minimum.",
            "Given several integers on one line, print the smallest.",
        ),
        READ_XS + "print(min(xs))",
        (READ_XS + "print(max(xs))", READ_XS + "print(xs[0])"),
        _int_list,
        lambda s: str(min(map(int, s.split()))),
    ),
)


def _code_response(program: str) -> str:
    return f"```python\n{program}\n```"


def _code_problems(instruction: str) -> list[tuple[str, ToyProblem]]:
    problems = []
    for program in _PROGRAMS:
        rng = random.Random(zlib.crc32(program.name.encode()))
        inputs = [program.make_input(rng) for _ in range(CODE_TESTS_PER_PROBLEM)]
        spec = {
            "tests": {
                "format": "stdio",
                "inputs": inputs,
                "outputs": [program.solve(i) + "\n" for i in inputs],
            },
            "checker": "code_contests",
            "time_limit_s": 2.0,
            "memory_limit_mb": 256,
            "extract": "last_fence",
        }
        for number, phrasing in enumerate(program.phrasings):
            record = TaskRecord(
                prompt_id=f"toy-code-{program.name}-{number}",
                messages=[{"role": "user", "content": f"{phrasing}\n\n{instruction}".rstrip()}],
                program="code",
                spec=spec,
                meta={"source": "toy", "family": program.name},
            )
            wrong = tuple(_code_response(w) for w in program.wrong)
            problems.append(
                (
                    "test" if number == 2 else "train",
                    ToyProblem(record, _code_response(program.correct), wrong),
                )
            )
    return problems


TOY_INSTRUCTIONS: dict[TaskKind, str] = {"math": MATH_INSTRUCTION, "code": CODE_INSTRUCTION}
_BUILDERS: dict[TaskKind, Callable[[str], list[tuple[str, ToyProblem]]]] = {
    "math": _math_problems,
    "code": _code_problems,
}


def toy_problems(task: TaskKind, *, split: str = "train", instruction: str | None = None) -> list[ToyProblem]:
    """The toy problems of ``task`` with reference responses; ``split`` is train, test or all."""
    if split not in ("train", "test", "all"):
        raise ValueError(f"toy tasks have splits 'train', 'test' and 'all', not {split!r}")
    try:
        build = _BUILDERS[task]
    except KeyError:
        raise ValueError(f"no toy task {task!r}; valid: {sorted(_BUILDERS)}") from None
    text = TOY_INSTRUCTIONS[task] if instruction is None else instruction
    return [p for s, p in build(text) if split in ("all", s)]


def toy_tasks(task: TaskKind, *, split: str = "train", instruction: str | None = None) -> list[TaskRecord]:
    """The toy prompts of ``task`` (``load_tasks("toy", task)``)."""
    return [p.record for p in toy_problems(task, split=split, instruction=instruction)]
