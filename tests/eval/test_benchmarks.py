"""The benchmark registry: one place for each kind's defaults, read by every entry point; a plug-in
kind installed through the `mucode.benchmarks` entry-point group gets its `mucode eval` command and
its training-time evaluation with no change to mucode."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from plugin_dist import write_dist

from mucode.cli.eval import resolve_protocol
from mucode.config import load_config
from mucode.eval.benchmarks import BENCHMARKS, benchmark_of, evaluate_benchmarks, get_protocol, protocols_for
from mucode.train.evaluation import eval_plan


def _fields(protocol: Any) -> tuple[Any, ...]:
    s = protocol.sampling
    return protocol.name, s.temperature, s.top_p, s.stop, dict(protocol.samples_per_problem), protocol.prompt


def test_cli_and_training_read_the_same_defaults() -> None:
    cfg = load_config(None, ["eval.benchmarks=[livecodebench,math500,humaneval]"])
    plan = {bench.name: protocol for bench, protocol, _ in eval_plan(cfg)}
    assert set(plan) == {"livecodebench", "math", "evalplus"}
    for kind, protocol in plan.items():
        cli = resolve_protocol(kind, None, None)
        assert _fields(protocol) == _fields(cli) == _fields(BENCHMARKS.get(kind).default_protocol), kind
        assert protocol.sampling.max_new_tokens == cfg.rollout.max_response_tokens  # the run's own budget
    # LiveCodeBench used to be sampled at 0.6 during training; now the default protocol's temperature
    assert plan["livecodebench"].sampling.temperature == get_protocol("livecodebench").sampling.temperature
    overridden = load_config(None, ["eval.benchmarks=[aime24]", "eval.temperature=0.3"])
    ((_, protocol, _),) = eval_plan(overridden)
    assert (
        protocol.sampling.temperature == 0.3
        and protocol.sampling.top_p == get_protocol("math").sampling.top_p
    )


def test_names_group_by_kind_and_unknown_names_list_every_kind() -> None:
    groups = [(b.name, p.name, names) for b, p, names in protocols_for(
        ["aime24", "livecodebench_v1", "humaneval", "math500"], "paper")]  # fmt: skip
    assert groups == [("math", "paper", ["aime24", "math500"]), ("livecodebench", "paper", ["livecodebench_v1"]),
                      ("evalplus", "evalplus", ["humaneval"])]  # evalplus has no `paper`: its default  # fmt: skip
    with pytest.raises(
        ValueError, match=r"unknown benchmark 'gsm8k'; valid: evalplus: humaneval, mbpp; .*math: math500"
    ):
        benchmark_of("gsm8k")
    with pytest.raises(
        ValueError, match="unknown benchmark 'nope'; valid names: evalplus, livecodebench, math"
    ):
        BENCHMARKS.get("nope")


_PLUGIN = """
import json
from typing import Annotated

import typer

from mucode.eval.benchmarks import Benchmark
from mucode.cli.eval_options import option
from mucode.cli.eval_jobs import CliJob
from mucode.eval.protocols import Protocol, Sampling

PROTOCOLS = (Protocol("plain", "wordcount", "a test plug-in", Sampling(0.5, 0.9, 16), {"*": 3}, "plain"),)


def evaluate_names(names, source, data_dir, protocol, n, **kw):
    engine = source.engine
    return {name: {"pass@1": 1.0, "n_problems": 1, "samples_per_problem": n or protocol.samples_for(name),
                   "temperature": engine.sampling.temperature, "stop": list(source.stop)} for name in names}


def options():
    return [option("word", Annotated[str, typer.Option("--word", help="The word to look for.")], "x")]


def prepare(common, protocol, *, limit, n, word):
    rows = [json.loads(line) for line in common.samples.read_text().splitlines() if line.strip()]

    def evaluate(source, **kw):
        hits = [word in row["response"] for row in rows]
        return {"wordcount": {"pass@1": sum(hits) / len(hits), "n_problems": len(rows), "samples_per_problem": 1}}

    return CliJob(protocol, evaluate, "Word count", protocol.prompt, lambda: {"wordcount": str(common.samples)},
                  needs_engine=False)


BENCHMARK = Benchmark("wordcount", "Count a word (a test plug-in).", PROTOCOLS,
                      lambda name: name.startswith("wordcount"), "wordcount_<anything>", evaluate_names,
                      options, prepare, context_option=False)
"""


@pytest.fixture
def plugin_path(tmp_path: Path) -> Path:
    """A distribution on disk declaring a `wordcount` benchmark under `mucode.benchmarks`."""
    return write_dist(
        tmp_path / "site", "wordcount_plugin", _PLUGIN, "mucode.benchmarks", {"wordcount": "BENCHMARK"}
    )


def _mucode(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", "from mucode.cli import main; main()", *args], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip


def test_a_plugin_benchmark_gets_a_command_from_the_generic_body(plugin_path: Path, tmp_path: Path) -> None:
    listing = _mucode(plugin_path, "eval", "--help")
    assert listing.returncode == 0 and "wordcount" in listing.stdout, listing.stderr
    helped = _mucode(plugin_path, "eval", "wordcount", "--help")
    assert "--word" in helped.stdout and "--samples" in helped.stdout and "--context" not in helped.stdout
    samples = tmp_path / "s.jsonl"
    samples.write_text(
        "".join(json.dumps({"id": i, "response": r}) + "\n" for i, r in enumerate(["a hi", "b", "hi"]))
    )
    report = tmp_path / "r.json"
    done = _mucode(plugin_path, "eval", "wordcount", "--samples", str(samples), "--word", "hi", "--no-cache",
                   "-o", str(report))  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = json.loads(report.read_text())
    assert written["wordcount"]["pass@1"] == pytest.approx(2 / 3)
    assert written["meta"]["protocol"]["name"] == "plain" and "| wordcount" in done.stdout
    wrong = _mucode(plugin_path, "eval", "wordcount", "--samples", str(samples), "--protocol", "nope")
    assert wrong.returncode == 2 and wrong.stderr.strip().splitlines()[-1].startswith("error: ")
    assert "valid: plain" in wrong.stderr and "Traceback" not in wrong.stderr


def test_a_plugin_benchmark_is_evaluated_by_name_with_its_own_protocol(
    plugin_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(plugin_path))
    BENCHMARKS.refresh()
    try:
        built: list[Any] = []

        def engine_for(protocol: Any) -> Any:
            built.append(SimpleNamespace(sampling=protocol.sampling.engine_params(seed=0), closed=False))
            built[-1].close = lambda: setattr(built[-1], "closed", True)
            return built[-1]

        report = evaluate_benchmarks(["wordcount_a", "wordcount_b"], None, None, engine_for=engine_for)
    finally:
        monkeypatch.undo()
        BENCHMARKS.refresh()
    assert report == {name: {"pass@1": 1.0, "n_problems": 1, "samples_per_problem": 3, "temperature": 0.5,
                             "stop": []} for name in ("wordcount_a", "wordcount_b")}  # fmt: skip
    assert len(built) == 1 and built[0].closed  # one engine for the kind, closed when it is done
    assert "wordcount" not in BENCHMARKS


def test_math_with_the_shared_docker_default_starts_no_sandbox(tmp_path: Path) -> None:
    """Every command defaults to `--backend docker`; a math run must not need Docker for it."""
    from mucode.eval.math_bench import load_math_problems

    problems = load_math_problems("aime24")
    samples = tmp_path / "aime24.jsonl"
    samples.write_text("".join(json.dumps({"id": p.id, "response": f"So $\\boxed{{{p.answer}}}$."}) + "\n"
                               for p in problems))  # fmt: skip
    report = tmp_path / "r.json"
    done = subprocess.run(
        [sys.executable, "-c", "from mucode.cli import main; main()", "eval", "math", "--samples", str(samples),
         "--benchmark", "aime24", "--no-cache", "-o", str(report)],
        env={**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-docker.sock"}, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(report.read_text())["aime24"]["pass@1"] == 1.0
