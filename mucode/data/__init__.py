"""Task data: loaders that turn a data source into ``TaskRecord`` prompts, and prompt rendering.

Public API::

    from mucode.data import TaskRecord, load_tasks, render_prompt, render_prompts

    records = load_tasks("default", "code")                 # deepmind/code_contests from the Hub
    records = load_tasks("/data/cc", "code", split="valid")  # local jsonl/json/parquet file or dir
    records = load_tasks("data/train.parquet", "math")      # verl RL Parquet, detected from its columns
    records = load_tasks("toy", "math", limit=64)           # built-in toy task, no download
    ids = render_prompt(tokenizer, records[0])              # chat template + instruction -> token ids
    prompts = render_prompts(tokenizer, records)            # [(prompt_id, ids)] for RolloutEngine.generate
    item = records[0].verifier_item(response_text, item_id) # verifier item

``TaskRecord(prompt_id, messages, program, spec, meta)``: ``messages`` are the chat messages before
the template (the instruction is already in the last user message); ``program`` is the reward
program (``math``/``code``/plugin); ``spec`` is the spec (math ``{"answer": ...}``, code
``{"tests": {...}, "checker", "time_limit_s", "memory_limit_mb", "extract"}``).

``load_tasks(source, task, *, split="train", limit=None, instruction=None, **kw)``: see
``mucode.data.loader`` (``load_task_set`` also returns what was dropped and why) and
``mucode.data.schemas`` for the row schemas (code_contests, math, verl, mucode) and filters.
``DEFAULT_SOURCES`` holds the paper's training sets; ``MATH_INSTRUCTION``/``CODE_INSTRUCTION``
the default instructions. Files (local or from the Hub) are read by ``mucode.data.files``, the one
reading layer the evaluators share (``datasets`` streaming, with a standard-library fallback where
Arrow typing would change the data). Formats and offline use: docs/data.md.
"""

from mucode.data.loader import DEFAULT_SOURCES, TaskSet, load_task_set, load_tasks
from mucode.data.prompts import render_prompt, render_prompts
from mucode.data.schemas import CODE_INSTRUCTION, MATH_INSTRUCTION, SCHEMAS, register_schema
from mucode.data.types import TaskKind, TaskRecord

__all__ = [
    "CODE_INSTRUCTION",
    "DEFAULT_SOURCES",
    "MATH_INSTRUCTION",
    "SCHEMAS",
    "TaskKind",
    "TaskRecord",
    "TaskSet",
    "load_task_set",
    "load_tasks",
    "register_schema",
    "render_prompt",
    "render_prompts",
]
