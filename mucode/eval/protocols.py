"""Named evaluation protocols: every setting a published number depends on, in one place.

A protocol fixes, for one kind of benchmark (`math`, `livecodebench`, `evalplus`): sampling
(temperature, top-p, response budget, stop strings), samples per problem, the prompt (math template,
LiveCodeBench or EvalPlus prompt style) and the data (LiveCodeBench release). Each benchmark of the
registry (`mucode.eval.benchmarks.BENCHMARKS`) carries its protocols, the first being its default:
`mucode eval <kind> --protocol NAME`, the trainer's periodic evaluation and the Python evaluators look
them up there (`get_protocol(kind, name)`); explicit options override single fields. This module only
defines them; each protocol names its source.

Protocols:
- math `paper`: the μ-GRPO paper's math evaluation where it is stated (avg@16 on AIME24/25, avg@4
  on MATH500/AMC23/AMC24; context 4k for Qwen2.5-Math-7B, 8k for the other models) and, where it is
  not, M2PO's published validation settings, which the paper's setup follows: temperature 1.0,
  top-p 0.7, responses of at most context − 1,536 tokens (2,560 at 4k, 6,656 at 8k; its
  `max_prompt_length` is 1,536), and its prompt "Please solve the following math problem: {problem}.
  The assistant first thinks … Let's solve this step by step. " as the user turn.
- math `boxed`: mucode's earlier default: temperature 0.6, top-p 0.95, 4,096 new tokens, the problem
  followed by "Let's think step by step and output the final answer within \\boxed{}." (the
  instruction of SimpleRL-style evaluations); same sample counts.
- livecodebench `paper`: pass@4 (4 samples) at the 8k context of the paper's code runs (6,656 new
  tokens); sampling not stated in the paper: M2PO's validation sampling (temperature 1.0, top-p
  0.7); LiveCodeBench's chat prompt, its `###` stop string and its `release_latest`.
- livecodebench `livecodebench`: LiveCodeBench runner's defaults: 10 samples, temperature 0.2,
  top-p 0.95, 2,000 new tokens, stop `###`, chat prompt, `release_latest`.
- evalplus `evalplus`: evalplus `codegen`'s greedy defaults: 1 sample, 768 new tokens, temperature
  1e-4 (mucode's engines sample; this is greedy up to ties), its chat prompt.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mucode.rollout.types import SamplingParams

__all__ = [
    "EVALPLUS_PROTOCOLS",
    "LIVECODEBENCH_PROTOCOLS",
    "MATH_PROTOCOLS",
    "MATH_TEMPLATES",
    "MathTemplate",
    "Protocol",
    "Sampling",
    "math_template",
]


@dataclass(frozen=True)
class Sampling:
    """How responses are sampled."""

    temperature: float
    top_p: float
    max_new_tokens: int
    """Response budget in tokens."""
    stop: tuple[str, ...] = ()
    """Generation ends before the first of these strings (applied to the decoded text)."""

    def engine_params(self, seed: int) -> SamplingParams:
        """The engines' sampling parameters (the stop strings are not among them: they cut the text)."""
        from mucode.rollout.types import SamplingParams  # lazy: torch

        return SamplingParams(
            temperature=self.temperature, top_p=self.top_p, max_new_tokens=self.max_new_tokens, seed=seed
        )


@dataclass(frozen=True)
class MathTemplate:
    """The user turn of a math prompt: prefix + problem + suffix."""

    prefix: str
    suffix: str
    strip_problem: bool = False
    """Strip trailing whitespace from the problem first."""

    def render(self, problem: str) -> str:
        return self.prefix + (problem.rstrip() if self.strip_problem else problem) + self.suffix


MATH_TEMPLATES: Mapping[str, MathTemplate] = MappingProxyType(
    {
        "m2po": MathTemplate(
            "Please solve the following math problem: ",
            ". The assistant first thinks about the reasoning process step by step and then provides the user "
            "with the answer. Return the final answer in \\boxed{} tags, for example \\boxed{1}. Let's solve "
            "this step by step. ",
        ),
        "boxed": MathTemplate(
            "", " Let's think step by step and output the final answer within \\boxed{}.", strip_problem=True
        ),
    }
)
"""Math prompt templates by name."""


def math_template(name: str) -> MathTemplate:
    """A math template by name; the error lists the valid names."""
    try:
        return MATH_TEMPLATES[name]
    except KeyError:
        raise ValueError(
            f"unknown math prompt template {name!r}; valid: {', '.join(MATH_TEMPLATES)}"
        ) from None


@dataclass(frozen=True)
class Protocol:
    """Everything a benchmark kind's published number depends on."""

    name: str
    kind: str
    """`math`, `livecodebench` or `evalplus`."""
    source: str
    """Where the settings come from."""
    sampling: Sampling
    samples_per_problem: Mapping[str, int]
    """Benchmark → samples; key `*` for any other benchmark of the kind."""
    prompt: str
    """math: a `MATH_TEMPLATES` name; livecodebench/evalplus: a prompt style."""
    release: str | None = None
    """livecodebench: the release (LiveCodeBench's name)."""
    context_tokens: int | None = None
    """The context the response budget derives from (None: a fixed budget)."""
    prompt_budget_tokens: int = 1536
    """With `context_tokens`: the response budget is context − this."""
    contexts: tuple[int, ...] = field(default=())
    """Contexts this protocol is stated for (empty: any)."""

    def samples_for(self, benchmark: str) -> int:
        return self.samples_per_problem.get(benchmark, self.samples_per_problem["*"])

    def with_context(self, context_tokens: int) -> Protocol:
        """The protocol at another context (response budget = context − prompt budget)."""
        if self.context_tokens is None:
            raise ValueError(f"protocol {self.kind}/{self.name} has a fixed response budget; drop --context")
        if self.contexts and context_tokens not in self.contexts:
            valid = ", ".join(str(c) for c in self.contexts)
            raise ValueError(
                f"protocol {self.kind}/{self.name} is stated for contexts {valid}; got {context_tokens}"
            )
        budget = context_tokens - self.prompt_budget_tokens
        return dataclasses.replace(
            self,
            context_tokens=context_tokens,
            sampling=dataclasses.replace(self.sampling, max_new_tokens=budget),
        )


_PAPER_MATH_SAMPLES = MappingProxyType({"aime24": 16, "aime25": 16, "*": 4})
_LCB_STOP = ("###",)

MATH_PROTOCOLS: tuple[Protocol, ...] = (
    Protocol(
        "paper",
        "math",
        "μ-GRPO paper (avg@16 AIME, avg@4 others, 4k/8k context) + M2PO validation scripts "
        "(temperature 1.0, top-p 0.7, response = context − 1536, prefix+suffix prompt)",
        Sampling(1.0, 0.7, 6656),
        _PAPER_MATH_SAMPLES,
        "m2po",
        context_tokens=8192,
        contexts=(4096, 8192),
    ),
    Protocol(
        "boxed",
        "math",
        "mucode's earlier default (SimpleRL-style instruction suffix)",
        Sampling(0.6, 0.95, 4096),
        _PAPER_MATH_SAMPLES,
        "boxed",
    ),
)
"""The math benchmarks' protocols; the first is the default."""

LIVECODEBENCH_PROTOCOLS: tuple[Protocol, ...] = (
    Protocol(
        "paper",
        "livecodebench",
        "μ-GRPO paper (pass@4, 8k context); sampling not stated: M2PO validation (temperature 1.0, "
        "top-p 0.7); LiveCodeBench's chat prompt, stop string and release_latest",
        Sampling(1.0, 0.7, 6656, _LCB_STOP),
        MappingProxyType({"*": 4}),
        "chat",
        release="release_latest",
        context_tokens=8192,
        contexts=(4096, 8192),
    ),
    Protocol(
        "livecodebench",
        "livecodebench",
        "LiveCodeBench runner defaults (lcb_runner/runner/parser.py)",
        Sampling(0.2, 0.95, 2000, _LCB_STOP),
        MappingProxyType({"*": 10}),
        "chat",
        release="release_latest",
    ),
)
"""LiveCodeBench's protocols; the first is the default."""

EVALPLUS_PROTOCOLS: tuple[Protocol, ...] = (
    Protocol(
        "evalplus",
        "evalplus",
        "evalplus codegen defaults (greedy, 768 new tokens)",
        Sampling(0.0001, 1.0, 768),
        MappingProxyType({"*": 1}),
        "chat",
    ),
)
"""EvalPlus's protocols; the first is the default."""
