"""End to end with the embedded tiny policy on CPU: generate → verify → report, and resume.

The tiny policy writes near-garbage for these benchmarks; what is checked is the pipeline: n samples
per problem, every verdict from the verifier, the report's keys, and that an interrupted run resumes
without regenerating or re-verifying what it already has.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mucode.eval.core import EngineSource
from mucode.eval.evalplus.evaluate import evaluate_evalplus
from mucode.eval.judge import VerifierOptions
from mucode.eval.livecodebench.evaluate import evaluate_livecodebench

FIXTURES = Path(__file__).resolve().parent / "fixtures"


class CountingEngine:
    """Passes calls to a real engine; counts prompts and can stop after some groups (a crash)."""

    def __init__(self, engine: Any, crash_after_groups: int | None = None) -> None:
        self.engine = engine
        self.crash_after_groups = crash_after_groups
        self.prompts = 0

    def generate(self, prompts: list[tuple[str, list[int]]], samples_per_prompt: int) -> Iterator[Any]:
        self.prompts += len(prompts)
        for done, group in enumerate(self.engine.generate(prompts, samples_per_prompt), 1):
            yield group
            if self.crash_after_groups is not None and done >= self.crash_after_groups:
                raise RuntimeError("simulated crash")


@pytest.fixture(scope="module")
def tiny() -> Iterator[tuple[Any, Any]]:
    from mucode.assets import tiny_policy_path
    from mucode.rollout import SamplingParams, make_engine

    engine = make_engine(
        "hf",
        str(tiny_policy_path()),
        SamplingParams(temperature=1.0, max_new_tokens=24, seed=0),
        batch_size=16,
        device="cpu",
    )
    yield engine, engine.tokenizer
    engine.close()


def test_livecodebench_run_resumes_without_redoing_work(
    tiny: tuple[Any, Any], code_verifier: VerifierOptions, tmp_path: Path
) -> None:
    engine, tokenizer = tiny
    kwargs: dict[str, Any] = dict(
        release="release_v2",
        data_dir=FIXTURES / "livecodebench",
        samples_per_problem=2,
        verifier=code_verifier,
        run_dir=tmp_path,
    )
    crashing = CountingEngine(engine, crash_after_groups=1)
    with pytest.raises(RuntimeError, match="simulated crash"):
        evaluate_livecodebench(EngineSource(crashing, tokenizer, {"model": "tiny"}), **kwargs)
    saved = (tmp_path / "livecodebench" / "samples.jsonl").read_text().splitlines()
    assert len(saved) == 2 and len({json.loads(line)["id"] for line in saved}) == 1

    resumed = CountingEngine(engine)
    report = evaluate_livecodebench(EngineSource(resumed, tokenizer, {"model": "tiny"}), **kwargs)[
        "livecodebench"
    ]
    assert resumed.prompts == 2, "only the two problems without samples are generated"
    assert report["n_problems"] == 3 and report["n_samples"] == 6 and report["samples_per_problem"] == 2
    assert report["infra_errors"] == 0
    assert {"pass@1", "pass@2", "by_difficulty", "by_platform"} <= set(report)

    again, messages = CountingEngine(engine), []
    report_again = evaluate_livecodebench(
        EngineSource(again, tokenizer, {"model": "tiny"}), progress=messages.append, **kwargs
    )["livecodebench"]
    assert again.prompts == 0 and not any("to verify" in m for m in messages)
    assert report_again["pass@1"] == report["pass@1"]

    with pytest.raises(Exception, match="other settings"):
        evaluate_livecodebench(EngineSource(CountingEngine(engine), tokenizer, {"model": "other"}), **kwargs)


def test_evalplus_with_a_prefilled_assistant_turn(
    tiny: tuple[Any, Any], code_verifier: VerifierOptions, tmp_path: Path
) -> None:
    engine, tokenizer = tiny
    report = evaluate_evalplus(
        EngineSource(engine, tokenizer),
        ("humaneval",),
        override_paths={"humaneval": FIXTURES / "evalplus" / "HumanEvalPlus.jsonl"},
        samples_per_problem=2,
        verifier=code_verifier,
        run_dir=tmp_path,
    )
    assert set(report) == {"humaneval", "humaneval+"}
    assert report["humaneval"]["n_samples"] == 6 and report["humaneval+"]["infra_errors"] == 0


def test_math_cli_with_the_tiny_policy(
    math_data: Path, math_verifier: VerifierOptions, tmp_path: Path
) -> None:
    from typer.testing import CliRunner

    from mucode.cli import get_app

    out, table = tmp_path / "math.json", tmp_path / "math.md"
    result = CliRunner().invoke(
        get_app(),
        [
            "eval",
            "math",
            "--model",
            "tiny",
            "--benchmarks",
            "aime24,amc23",
            "--data-dir",
            str(math_data),
            "--limit",
            "3",
            "-n",
            "2",
            "--max-tokens",
            "24",
            "--device",
            "cpu",
            "--output",
            str(out),
            "--markdown",
            str(table),
            "--run-dir",
            str(tmp_path / "run"),
            "--verifier-url",
            math_verifier.urls[0],
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert set(report) == {"aime24", "amc23", "average", "meta"}
    meta = report["meta"]
    assert meta["model"] == "tiny" and meta["protocol"]["name"] == "paper" and meta["engine"] == "hf"
    assert meta["sampling"] == {"temperature": 1.0, "top_p": 0.7, "max_new_tokens": 24, "stop": []}
    assert meta["prompt"].startswith("m2po") and "evalchemy@" in meta["data"]["aime24"]
    assert meta["mucode_version"] and meta["date"]
    assert report["aime24"]["n_samples"] == 6 and report["aime24"]["samples_per_problem"] == 2
    assert 0.0 <= report["average"]["pass@1"] <= 1.0
    assert "| aime24" in table.read_text()


def test_evaluate_benchmarks_for_the_trainer(tiny: tuple[Any, Any], math_data: Path, tmp_path: Path) -> None:
    """The trainer's entry point: benchmarks of two kinds by name, one verifier serving both programs."""
    from mucode.eval import evaluate_benchmarks, metrics_from_report
    from mucode.eval.judge import verifier_base_urls

    engine, tokenizer = tiny
    data = tmp_path / "data"
    data.mkdir()
    (data / "aime24.json").write_text("".join((math_data / "aime24.json").read_text().splitlines(True)[:3]))
    shutil.copytree(FIXTURES / "livecodebench", data / "livecodebench")
    both = VerifierOptions(backend="local", local_options={"programs": ["math", "code"]})
    with verifier_base_urls(both) as urls:
        report = evaluate_benchmarks(
            ["aime24", "livecodebench_v1"],
            engine,
            tokenizer,
            data_dir=data,
            samples_per_problem=1,
            verifier=VerifierOptions(urls=urls),
            run_dir=tmp_path / "run",
            fingerprint={"model": "tiny", "update": 0},
            protocol="paper",
        )
    assert set(report) == {"aime24", "livecodebench_v1"}
    assert report["aime24"]["n_problems"] == 3 and report["livecodebench_v1"]["n_problems"] == 2
    manifest = json.loads((tmp_path / "run" / "aime24" / "manifest.json").read_text())
    assert (
        manifest["template"]["prefix"] == "Please solve the following math problem: "
    )  # the paper protocol's
    assert "stop" not in manifest["generation"] and manifest["generation"]["protocol"] == "paper"
    lcb = json.loads((tmp_path / "run" / "livecodebench" / "manifest.json").read_text())
    assert lcb["prompt_style"] == "chat" and lcb["generation"]["stop"] == ["###"]
    metrics = metrics_from_report(report)
    assert set(metrics) == {"eval/aime24/pass@1", "eval/livecodebench_v1/pass@1"}
