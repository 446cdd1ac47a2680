"""Files in the upstream harnesses' own formats, so mucode's results can be read by their tools and theirs by mucode.

LiveCodeBench (`lcb_runner/runner/custom_evaluator.py`):
- input: its generation output, a JSON list of `{"question_id", "code_list", ...}` (code already
  extracted; `output_list` optional) — `read_lcb_generations`;
- output: `<name>_eval_all.json`, one object per problem (its fields, `output_list`, `code_list`,
  `graded_list`, `pass@1`, `metadata`), and `<name>_eval.json`, `[metrics, results, metadata]` with
  `metrics = {"pass@k": …, "detail": {"pass@k": {index: value}}}` over problems sorted by
  question_id — `write_lcb_eval`. Limit: mucode keeps one verdict per sample, not per test, so each
  sample's `results` entry is one value (True, or LiveCodeBench's error code: -2 wrong answer,
  -3 time limit, -4 runtime error or no code), which gives the same pass@k with its tools.
EvalPlus (`evalplus/evaluate.py`, 0.3.1): samples as it reads them (`read_evalplus_samples`), and
`<samples>_eval_results.json`: `{"date", "hash", "eval": {task_id: [{"task_id", "solution",
"base_status", "plus_status", "base_fail_tests", "plus_fail_tests"}]}}` with statuses `pass`,
`fail`, `timeout` — `write_evalplus_results`; `*_fail_tests` holds the input that failed (evalplus's
fast check: the first failing one), empty when the code failed before any input ran, as there.
`evalplus.evaluate --samples S` looks for its results at `S` with `.jsonl` replaced by
`_eval_results.json` (a folder: `S/eval_results.json`), so `write_evalplus_upstream` writes the pair
evalplus expects into the output folder: `NAME.jsonl` (`{"task_id", "solution"}` per sample, the
code judged) and `NAME_eval_results.json`, NAME being the samples file's name without `.jsonl` (the
data set's name for generated samples or a samples folder); `evalplus.evaluate --dataset D --samples
OUT/NAME.jsonl` then loads mucode's results instead of running anything.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from mucode.eval.core import Collected
from mucode.eval.passk import pass_at_k
from mucode.eval.store import INFRA_STATUSES

__all__ = [
    "is_lcb_generations",
    "read_lcb_generations",
    "write_evalplus_results",
    "write_evalplus_upstream",
    "write_lcb_eval",
]

_LCB_ERROR_CODES = {"wrong_answer": -2, "time_limit": -3}


def is_lcb_generations(path: str | Path) -> bool:
    """Whether a samples file is LiveCodeBench's generation output (a JSON list) rather than JSON Lines."""
    with Path(path).open(encoding="utf-8") as handle:
        head = handle.read(4096).lstrip()
    return head.startswith("[")


def read_lcb_generations(path: str | Path) -> dict[str, list[str]]:
    """question_id → codes, from LiveCodeBench's generation output."""
    try:
        rows = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}: not JSON ({err.msg})") from err
    samples: dict[str, list[str]] = {}
    for number, row in enumerate(rows if isinstance(rows, list) else [None]):
        if not (isinstance(row, dict) and "question_id" in row and isinstance(row.get("code_list"), list)):
            raise ValueError(
                f'{path}: entry {number} is not {{"question_id": ..., "code_list": [...]}} '
                "(LiveCodeBench's generation output)"
            )
        samples.setdefault(str(row["question_id"]), []).extend(str(c) for c in row["code_list"])
    return samples


def _lcb_result(status: str) -> bool | int:
    return True if status == "correct" else _LCB_ERROR_CODES.get(status, -4)


def write_lcb_eval(
    collected: Collected, out_dir: str | Path, name: str = "livecodebench"
) -> tuple[Path, Path]:
    """Write `<name>_eval_all.json` and `<name>_eval.json` in LiveCodeBench's formats; returns both paths."""
    task: Any = collected.task
    by_id = {p.question_id: p for p in task.lcb_problems}
    ids = sorted(pid for pid in collected.responses if collected.responses[pid])
    eval_all, results, metadata, counts = [], {}, [], []
    for index, pid in enumerate(ids):
        problem, outputs = by_id[pid], collected.responses[pid]
        statuses = [collected.verdicts[(pid, i, "main")]["status"] for i in range(len(outputs))]
        scored = [s for s in statuses if s not in INFRA_STATUSES]
        graded = [s == "correct" for s in statuses]
        eval_all.append(
            {
                "question_title": problem.title,
                "question_content": problem.content,
                "platform": problem.platform,
                "question_id": pid,
                "contest_id": problem.contest_id,
                "contest_date": problem.contest_date.isoformat(),
                "starter_code": problem.starter_code,
                "difficulty": problem.difficulty,
                "output_list": outputs,
                "code_list": [task.code(o) or "" for o in outputs],
                "graded_list": graded,
                "pass@1": graded.count(True) / len(graded),
                "metadata": [{"status": s} for s in statuses],
            }
        )
        results[str(index)] = [[_lcb_result(s)] for s in statuses]
        metadata.append([{"status": s} for s in statuses])
        counts.append((len(statuses), sum(s == "correct" for s in scored)))  # charged samples are failures
    metrics: dict[str, Any] = {"detail": {}}
    n_min = min((n for n, _ in counts), default=0)
    for k in (1, 5, 10, 20, 40, 50, 75, 100, 125, 150, 200, 500, 1000):
        if n_min < k:
            break
        per = {str(i): pass_at_k(n, c, k) for i, (n, c) in enumerate(counts)}
        metrics[f"pass@{k}"] = sum(per.values()) / len(per)
        metrics["detail"][f"pass@{k}"] = per
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    all_path, eval_path = out / f"{name}_eval_all.json", out / f"{name}_eval.json"
    all_path.write_text(json.dumps(eval_all, indent=4))
    eval_path.write_text(json.dumps([metrics, results, metadata], indent=4))
    return all_path, eval_path


def _evalplus_status(status: str) -> str:
    return "pass" if status == "correct" else "timeout" if status == "time_limit" else "fail"


def _failed_inputs(task: Any, pid: str, which: str, verdict: dict[str, Any]) -> list[Any]:
    """evalplus's `*_fail_tests` with its fast check: the input that failed, wrongly, with an error or
    out of time (the driver prints `FAIL <i>` / `ERROR <i> …`); empty when none ran (i = -1), as there."""
    words = str(verdict.get("stdout_head", "")).split()
    if verdict["status"] == "correct" or len(words) < 2 or words[0] not in ("FAIL", "ERROR"):
        return []
    inputs = task.evalplus_problems[pid][f"{which}_input"]
    index = int(words[1]) if words[1].lstrip("-").isdigit() else -1
    failed = [inputs[index]] if 0 <= index < len(inputs) else []
    if task.dataset == "mbpp":
        from evalplus.data.mbpp import mbpp_serialize_inputs  # lazy: evalplus

        failed = mbpp_serialize_inputs(pid, failed)
    return failed


def write_evalplus_upstream(
    collected: Collected,
    out_dir: str | Path,
    dataset_hash: str,
    dataset: str,
    samples: str | Path | None = None,
) -> Path:
    """Writes `NAME.jsonl` and `NAME_eval_results.json` into `out_dir` (module docstring); returns the latter."""
    source = Path(samples) if samples is not None else None
    name = source.name[: -len(".jsonl")] if source is not None and source.name.endswith(".jsonl") else dataset
    task: Any = collected.task
    lines = [
        json.dumps({"task_id": pid, "solution": task.solution(pid, response)})
        for pid, responses in collected.responses.items()
        for response in responses
    ]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.jsonl").write_text("".join(line + "\n" for line in lines))
    return write_evalplus_results(collected, out / f"{name}_eval_results.json", dataset_hash)


def write_evalplus_results(collected: Collected, path: str | Path, dataset_hash: str) -> Path:
    """Write evalplus's `*_eval_results.json` for one data set."""
    task: Any = collected.task
    results: dict[str, Any] = {
        "date": datetime.now().strftime("%Y-%m-%d %H:%M"),
        "hash": dataset_hash,
        "eval": {},
    }
    for pid, responses in collected.responses.items():
        rows = []
        for i, response in enumerate(responses):
            base, plus = collected.verdicts[(pid, i, "base")], collected.verdicts[(pid, i, "plus")]
            rows.append(
                {
                    "task_id": pid,
                    "solution": task.solution(pid, response),
                    "base_status": _evalplus_status(base["status"]),
                    "plus_status": _evalplus_status(plus["status"]),
                    "base_fail_tests": _failed_inputs(task, pid, "base", base),
                    "plus_fail_tests": _failed_inputs(task, pid, "plus", plus),
                }
            )
        results["eval"][pid] = rows
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results))
    return out
