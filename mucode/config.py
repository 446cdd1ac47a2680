"""The one typed config tree of mucode: every default lives here.

Precedence, lowest first: the defaults below → YAML files (`configs/*.yaml`, or preset names such
as `mu_grpo`; several, comma-separated, merge left to right: `mu_grpo,qwen2.5-math-7b`) → `key=value`
overrides (`algo.veto_scope=suffix`). `load_config` resolves all three
and validates the result; impossible combinations raise `ConfigError` with a message that names the
valid values. The defaults are the μ-GRPO paper's (Tian, Xie, Wei 2026) for math.

Batch sizes carry their unit in their name. μ (`batch.updates_per_stage`) is the number of
optimizer updates made on one stage's rollouts: B_train = μ · B_mini prompts are sampled per stage.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from mucode.config_algo import (
    SECTION_CONFIG,
    AlgoConfig,
    ObjectiveParamError,
    objective_param_keys,
)
from mucode.config_algo import nest_params as _nest_params
from mucode.config_methods import ComposeConfig, ReferenceConfig, SamplingConfig
from mucode.configs import CONFIG_DIR as PRESETS_DIR
from mucode.data.schemas import SCHEMAS
from mucode.protocol import Connection

if TYPE_CHECKING:
    from mucode.rollout.types import SamplingParams

__all__ = [
    "AlgoConfig",
    "AsyncConfig",
    "BatchConfig",
    "ConfigError",
    "DataConfig",
    "EvalConfig",
    "ModelConfig",
    "MucodeConfig",
    "ObjectiveParamError",
    "OptimConfig",
    "RolloutConfig",
    "TrainConfig",
    "VerifierConfig",
    "load_config",
    "objective_param_keys",
    "preset_names",
]

CONFIG_DIR = PRESETS_DIR


class ConfigError(ValueError):
    """A config that cannot run; the message says which key and which values are valid."""


class _Section(BaseModel):
    model_config = SECTION_CONFIG


class ModelConfig(_Section):
    path: str = "tiny"
    """Policy to train: a Hugging Face id, a local HF directory, or `tiny` for the embedded tiny policy."""
    dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Compute dtype: forward and backward passes, the rollout engine and the handed-over policy
    (bfloat16 on GPUs). Weights and optimizer state stay in `master_dtype` (mixed precision)."""
    master_dtype: Literal["float32", "bfloat16", "float16"] = "float32"
    """Master weights, optimizer state and checkpoints. Keep float32: at lr 1e-6 most bfloat16
    updates round away. Equal to `dtype` means pure low-precision training."""
    gradient_checkpointing: bool = False
    """Recompute activations in the backward pass to save memory."""
    trust_remote_code: bool = False
    """Passed to transformers when loading the model and tokenizer."""


class DataConfig(_Section):
    task: Literal["code", "math"] = "math"
    """Which kind of task: decides the default data source, reward program and instruction."""
    source: str | None = None
    """Hub id, local file/dir (jsonl, json, parquet, verl parquet), or `toy`. None: the task's default Hub set."""
    split: str = "train"
    """Split of the source to train on."""
    limit: int | None = None
    """Use at most this many prompts (None: all)."""
    instruction: str | None = None
    """Instruction appended to each problem. None: the paper's instruction for the task."""
    max_prompt_tokens: int = Field(2048, ge=1)
    """Prompts longer than this (chat template applied) are dropped before the run, and counted
    (`data/dropped_long_prompts` in the summary). Prompt + `rollout.max_response_tokens` must fit the model."""
    shuffle_seed: int = 0
    """Seed of the prompt order; each stage draws the next B_train prompts of this order."""
    format: str = "auto"
    """The rows' schema (named `format`: pydantic reserves `schema`). `auto` detects it from the first
    row; `trl` is TRL's (`prompt` text or messages, `solution` answer or `tests` code spec). `verl`,
    `mucode` and `trl` rows may mix math and code in one file (per row: `extra_info.mucode`/`ability`,
    `program`, `tests`); `data.task` is the default where a row does not say."""
    columns: dict[str, str] = Field(default_factory=dict)
    """Column renames applied to every row before the schema reads it, file name → schema name,
    e.g. {question: prompt, final_answer: solution}."""

    @field_validator("format")
    @classmethod
    def _registered(cls, name: str) -> str:
        if name != "auto" and name not in SCHEMAS:
            raise SCHEMAS.unknown(name, [*SCHEMAS.names(), "auto"])
        return name


class RolloutConfig(_Section):
    engine: str = "hf"
    """Inference engine: `vllm` on GPUs, `hf` (transformers) anywhere, `dummy` (random tokens, no model;
    benches), or a plug-in of the `mucode.engines` entry-point group."""
    temperature: float = Field(1.0, gt=0)
    """Sampling temperature; behaviour log-probs are taken at this temperature."""
    top_p: float = Field(1.0, gt=0, le=1)
    """Nucleus sampling. Anything < 1 makes engine log-probs differ from the trainer's (a warning is printed)."""
    top_k: int = -1
    """Top-k sampling; -1 is off. Anything > 0 makes engine log-probs differ from the trainer's."""
    max_response_tokens: int = Field(4096, gt=0)
    """Longest response sampled, in tokens."""
    batch_size: int = Field(64, gt=0)
    """`hf` engine: prompts generated together."""
    tensor_parallel_size: int = Field(1, ge=1)
    """`vllm` engine: GPUs per model replica."""
    data_parallel_size: int = Field(1, ge=1)
    """`vllm` engine: model replicas."""
    gpu_memory_utilization: float = Field(0.9, gt=0, le=1)
    """`vllm` engine: fraction of the GPU's total memory it may take (weights + KV cache); the trainer's
    state steps aside to host memory while it runs, so 0.9 fits."""
    seed: int = 0
    """Sampling seed (offset by the stage index)."""

    @field_validator("engine")
    @classmethod
    def _registered(cls, name: str) -> str:
        from mucode.rollout.factory import ENGINES  # lazy: torch

        return ENGINES.validate(name)

    def sampling_params(self) -> SamplingParams:
        """The engines' :class:`~mucode.rollout.types.SamplingParams` (``max_new_tokens`` is
        ``max_response_tokens``); a stage or rank changes the seed with ``.replace(seed=...)``."""
        from mucode.rollout.types import SamplingParams  # lazy: torch

        return SamplingParams(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            max_new_tokens=self.max_response_tokens,
            seed=self.seed,
        )


class BatchConfig(_Section):
    samples_per_prompt: int = Field(8, ge=2)
    """G: responses sampled per prompt (a group)."""
    prompts_per_update: int = Field(32, ge=1)
    """B_mini: prompt groups in one optimizer update. Not set: 32 for `data.task=math`, 16 for `code` (the paper's)."""
    updates_per_stage: int = Field(1024, ge=1)
    """μ: optimizer updates made on one stage's rollouts (staleness). GRPO baseline: 4."""
    num_stages: int = Field(4, ge=1)
    """Stages (generate once, then μ updates) in the run."""
    micro_batch_tokens: int = Field(16384, ge=1)
    """Token budget of one forward/backward micro-batch; gradients accumulate over the minibatch."""
    update_epochs: int = Field(1, ge=1)
    """Passes over each stage's rollouts: a stage samples B_mini · μ / update_epochs prompts (AGPO: 4)."""

    @model_validator(mode="after")
    def _epochs_divide(self) -> BatchConfig:
        if self.updates_per_stage % self.update_epochs:
            raise ValueError(
                f"batch.updates_per_stage={self.updates_per_stage} must be a multiple of "
                f"batch.update_epochs={self.update_epochs}"
            )
        return self

    def prompts_per_stage(self) -> int:
        """B_train: prompts sampled per stage (B_mini · μ / update_epochs)."""
        return self.prompts_per_update * self.updates_per_stage // self.update_epochs


class OptimConfig(_Section):
    lr: float = Field(1e-6, gt=0)
    """AdamW learning rate (constant)."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas."""
    weight_decay: float = Field(0.01, ge=0)
    """AdamW weight decay."""
    grad_clip: float | None = 1.0
    """Clip the global gradient norm to this (None: no clipping)."""
    warmup_updates: int = Field(0, ge=0)
    """Linear lr warm-up over this many updates (paper: 0, constant lr)."""


class TrainConfig(_Section):
    run_name: str = "mucode"
    """Name of the run; outputs go to runs/<run_name> unless run_dir is set."""
    run_dir: str | None = None
    """Directory of the run's outputs (config, stage stores, checkpoints, metrics, plots)."""
    seed: int = 0
    """Seed of model init noise, data order and sampling."""
    device: str = "auto"
    """Training device: auto (cuda if present), cpu, cuda."""
    checkpoint_every: int = Field(64, ge=1)
    """Save model + optimizer + data position every this many updates."""
    eval_every: int | None = None
    """Evaluate every this many updates (None: only at the end of the run if eval is configured)."""
    tensorboard: bool = True
    """Write TensorBoard events next to metrics.jsonl."""
    wandb_project: str | None = None
    """Log to this Weights & Biases project as well (needs `pip install wandb`)."""
    checkpoint_keep: int = Field(2, ge=1)
    """How many checkpoints to keep on disk (oldest removed first)."""
    groups_per_shard: int = Field(64, ge=1)
    """Stage store: prompt groups per Parquet shard (a shard is written, and fsynced, as it fills)."""
    log_entropy: bool = True
    """Log the policy's entropy every update (costs a softmax over the vocabulary per token)."""
    progress: bool = True
    """Show a progress bar per phase (rollout, optimize)."""
    cpu_threads: int | None = None
    """torch intra-op threads on CPU (None: torch's default). 1 is often fastest on a shared machine."""
    final_rollout_prompts: int = Field(0, ge=0)
    """After the last stage, sample this many prompts (× samples_per_prompt) with the final policy and
    report their mean reward (`reward/final_mean`); 0: off (use `mucode eval` on policy/stage-K)."""
    weight_sync: Literal["auto", "disk", "memory"] = "auto"
    """How β_{k+1} reaches the engine. `disk`: export policy/stage-K (HF format) and checkpoint at every
    stage end. `memory`: the engine keeps running and takes the weights in memory (hf: shares them;
    vllm: sleep mode + in-place load); no per-stage export, checkpoints only every `checkpoint_every`
    updates (and at the end). `auto`: memory when stages are shorter than `checkpoint_every` and the
    engine can take weights in memory, else disk."""
    keep_policies: int | None = Field(None, ge=1)
    """Keep only the newest this-many exported policies (policy/stage-K and the evaluated policy/update-N),
    plus the best evaluated one and the current stage's β; older ones are deleted. None: keep all."""


def _as_list(value: Any) -> Any:
    """A scalar where a list is expected is a one-element list; a comma-separated string is split."""
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


class VerifierConfig(_Section):
    url: list[str] = Field(default_factory=list)
    """Base URLs of running verifiers. Empty: start one in-process on loopback with `backend`."""
    backend: Literal["local", "docker"] = "local"
    """Sandbox backend of the in-process verifier (when url is empty)."""
    token: str | None = None
    """Bearer token for the verifier."""
    timeout_s: float = Field(Connection.timeout_s, gt=0)
    """Per-request timeout."""
    retries: int = Field(Connection.retries, ge=0)
    """Re-sends of an item after an infrastructure failure, counted once per item, across HTTP and
    service-side failures (an item is sent at most 1 + retries times), then charged to the policy:
    trained as a failure (reward 0), never left out."""
    max_masked_fraction: float = Field(0.05, ge=0.0, le=1.0)
    """The run stops (resumable, one-line error naming the cause) when more than this fraction of a
    stage's responses were charged after every retry (``verifier/masked_frac``): past it the
    verifier, not the policy, is failing. 1.0 never stops."""

    _url_list = field_validator("url", mode="before")(_as_list)

    def connection(self) -> Connection:
        """These settings as the clients take them (the other fields keep ``Connection``'s defaults)."""
        return Connection(token=self.token, timeout_s=self.timeout_s, retries=self.retries)

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict) and "max_retries" in data:
            raise ValueError(
                "verifier.max_retries was renamed verifier.retries (re-sends of an item after an "
                "infrastructure failure, counted once per item): write verifier.retries=N"
            )
        return data


class EvalConfig(_Section):
    benchmarks: list[str] = Field(default_factory=list)
    """Benchmarks run at eval time (e.g. math500, aime24, livecodebench). Empty: no evaluation."""

    _benchmark_list = field_validator("benchmarks", mode="before")(_as_list)
    data_dir: str | None = None
    """Local directory of evaluation data (offline); None: the Hub."""
    samples_per_problem: int | None = None
    """Samples per problem; None: the protocol's (the paper's: AIME 16, others 4)."""
    limit: int | None = Field(None, ge=1)
    """Evaluate only the first this-many problems of each benchmark (smoke runs; not comparable with papers)."""
    protocol: str | None = None
    """A named protocol of each benchmark kind (`mucode.eval.benchmarks`, e.g. `paper`): sampling, response
    budget (at the run's context, prompt + response), prompt and samples per problem. None: each kind's
    default protocol, as `mucode eval` uses, with `rollout.max_response_tokens` as the response budget."""
    temperature: float | None = Field(None, gt=0)
    """Sampling temperature of the evaluation during training; None: the protocol's."""
    top_p: float | None = Field(None, gt=0, le=1)
    """Nucleus sampling of the evaluation during training; None: the protocol's."""
    select_metric: str = "pass@1"
    """The best evaluated policy (best.json, policy/best) has the highest mean of this over `benchmarks`."""


class AsyncConfig(_Section):
    """Asynchronous μ-GRPO (`mucode.train.async_loop`): generator processes and the trainer at once."""

    enabled: bool = False
    """Overlap generation and training: generator processes sample with the latest published policy while
    the trainer consumes their verified groups. False: the staged trainer (generate, then optimize)."""
    generators: int = Field(1, ge=1)
    """Generator processes (each with its own engine; slots of a stage are dealt round-robin)."""
    sync_every: int = Field(4, ge=1)
    """The trainer publishes its weights (a new policy version) every this many updates."""
    max_lag_updates: int = Field(1024, ge=0)
    """Admission control: a group is never trained more than this many updates after the policy version
    that sampled it was published (generation waits instead). At least sync_every - 1; equal to it, the
    run is the staged run with batch.updates_per_stage = sync_every."""
    generator_devices: list[str] = Field(default_factory=list)
    """`CUDA_VISIBLE_DEVICES` of each generator process, dealt round-robin (e.g. `[2, 3]`: generator 0 on
    GPU 2, generator 1 on GPU 3). Empty: the generators inherit the trainer's."""

    @field_validator("generator_devices", mode="before")
    @classmethod
    def _device_names(cls, value: Any) -> Any:
        value = _as_list(value) if isinstance(value, str) else value
        return [str(v) for v in value] if isinstance(value, list | tuple) else [str(value)]

    max_generator_restarts: int = Field(3, ge=0)
    """A generator process that dies is started again this many times (in all), then the run stops."""
    poll_s: float = Field(0.05, gt=0)
    """How often a waiting trainer or generator looks for new groups or a new policy version."""
    engine_factory: str | None = None
    """`module:function` building a generator's engine as `function(cfg, policy_path, seed)`; None: the
    engine `rollout.engine` names, loaded from the published policy."""
    handoff: Literal["file", "push"] = "file"
    """How policy versions reach the generators (`mucode.train.async_handoff`): `file` (versioned directories
    and an atomic pointer) or `push` (a torch.distributed broadcast from the trainer's memory into each
    generator's running engine; `push_backend` says over what)."""
    push_backend: Literal["auto", "gloo", "nccl"] = "auto"
    """The `push` hand-off's backend: `nccl` (GPU to GPU; the generators on GPUs of their own), `gloo`
    (through CPU memory), `auto`: nccl when the trainer trains on a GPU and `generator_devices` is set."""


TASK_PROMPTS_PER_UPDATE: dict[str, int] = {"math": 32, "code": 16}
"""B_mini per task when `batch.prompts_per_update` is not given (the paper's math and code batches)."""


def _get(section: Any, key: str) -> Any:
    if isinstance(section, BaseModel):
        return getattr(section, key, None)
    return section.get(key) if isinstance(section, dict) else None


class MucodeConfig(_Section):
    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    rollout: RolloutConfig = Field(default_factory=RolloutConfig)
    algo: AlgoConfig = Field(default_factory=AlgoConfig)
    batch: BatchConfig = Field(default_factory=BatchConfig)
    optim: OptimConfig = Field(default_factory=OptimConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    compose: ComposeConfig = Field(default_factory=ComposeConfig)
    sampling: SamplingConfig = Field(default_factory=SamplingConfig)
    reference: ReferenceConfig = Field(default_factory=ReferenceConfig)
    asynchronous: AsyncConfig = Field(default_factory=AsyncConfig)

    @model_validator(mode="before")
    @classmethod
    def _task_batch(cls, data: Any) -> Any:
        """`data.task=code` takes the paper's code batch (16 prompts per update) unless the batch is set."""
        if not isinstance(data, dict):
            return data
        task = _get(data.get("data"), "task")
        batch = data.get("batch")
        given = batch.model_fields_set if isinstance(batch, BatchConfig) else set(batch or {})
        if task in TASK_PROMPTS_PER_UPDATE and "prompts_per_update" not in given:
            if isinstance(batch, BatchConfig):
                batch = batch.model_copy(update={"prompts_per_update": TASK_PROMPTS_PER_UPDATE[task]})
            else:
                batch = {**(batch or {}), "prompts_per_update": TASK_PROMPTS_PER_UPDATE[task]}
            data = {**data, "batch": batch}
        return data

    @model_validator(mode="after")
    def _check_combinations(self) -> MucodeConfig:
        if self.train.eval_every is not None and not self.eval.benchmarks:
            raise ValueError(
                "train.eval_every is set but eval.benchmarks is empty; name them, e.g. eval.benchmarks=[math500]"
            )
        if self.rollout.engine == "vllm" and self.train.device == "cpu":
            raise ValueError("rollout.engine=vllm needs a GPU; use rollout.engine=hf with train.device=cpu")
        a = self.asynchronous
        if a.enabled and a.max_lag_updates < a.sync_every - 1:
            raise ValueError(
                f"asynchronous.max_lag_updates={a.max_lag_updates} is below asynchronous.sync_every - 1 = "
                f"{a.sync_every - 1}: the trainer would wait for groups no generator may sample. Raise "
                f"max_lag_updates or lower sync_every"
            )
        if a.enabled and self.algo.recompute_behaviour_logprobs:
            raise ValueError(
                "asynchronous.enabled: the generators hold no trainer model, so "
                "algo.recompute_behaviour_logprobs is not available; set it to false"
            )
        return self


def preset_names() -> list[str]:
    """Names usable as `--config NAME` (the YAML files shipped in configs/)."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))


def _read_yaml(config: str | Path | list[str]) -> dict[str, Any]:
    """One file or preset; a list (or a comma-separated string of names) merges left to right."""
    if isinstance(config, list) or (isinstance(config, str) and "," in config and not Path(config).exists()):
        names = config if isinstance(config, list) else [c.strip() for c in config.split(",") if c.strip()]
        merged: dict[str, Any] = {}
        for name in names:
            _merge_layer(merged, _read_yaml(name))
        return merged
    path = Path(config)
    if not path.exists() and (CONFIG_DIR / f"{config}.yaml").exists():
        path = CONFIG_DIR / f"{config}.yaml"
    if not path.exists():
        raise ConfigError(
            f"config file {config!s} not found; give a path or one of the presets: {', '.join(preset_names())}"
        )
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(
            f"{where}: invalid YAML ({problem}); fix the file (indentation, a missing ':' or quote)"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: expected a mapping of sections at the top level, got {type(data).__name__}"
        )
    base = data.pop("defaults", None)
    if base is None:
        return data
    merged = _read_yaml(base)
    _merge_layer(merged, data)
    return merged


def _merge_layer(into: dict[str, Any], layer: dict[str, Any]) -> None:
    """Merge one layer (a file, or all overrides) into ``into``. The objective's parameters belong to
    the objective: a layer that selects another objective starts from that objective's defaults."""
    algo = layer.get("algo")
    if isinstance(algo, dict):
        try:
            algo = _nest_params(algo)
        except ValueError as err:
            raise ConfigError(str(err)) from None
        layer = {**layer, "algo": algo}
        old = into.get("algo")
        default = AlgoConfig.model_fields["objective"].default
        if (
            isinstance(old, dict)
            and "objective" in algo
            and algo["objective"] != old.get("objective", default)
        ):
            old.pop("params", None)
    _deep_merge(into, layer)


def _deep_merge(into: dict[str, Any], new: dict[str, Any]) -> None:
    for key, value in new.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _deep_merge(into[key], value)
        else:
            into[key] = value


def _apply_override(tree: dict[str, Any], override: str) -> None:
    key, sep, raw = override.partition("=")
    if not sep or not key:
        raise ConfigError(f"override {override!r} is not key=value (for example algo.veto_scope=suffix)")
    parts = key.strip().split(".")
    known = MucodeConfig.model_fields
    if parts[0] not in known:
        raise ConfigError(
            f"unknown config section {parts[0]!r} in {override!r}; sections: {', '.join(known)}"
        )
    node = tree
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{key}: {part} is not a section")
    try:
        node[parts[-1]] = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        raise ConfigError(
            f"override {override!r}: the value is not valid YAML; quote it, e.g. {key}='{raw}'"
        ) from None


def _format_error(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"]) or "config"
        msg = e["msg"].removeprefix("Value error, ")
        cause = e.get("ctx", {}).get("error")
        if isinstance(cause, ObjectiveParamError) and cause.key:  # as the user wrote it: algo.KEY
            loc, msg = f"algo.{cause.key}", cause.detail
        if e["type"] == "extra_forbidden":
            section = MucodeConfig
            for p in e["loc"][:-1]:
                section = section.model_fields[str(p)].annotation  # type: ignore[assignment]
            msg = f"unknown key; valid keys here: {', '.join(section.model_fields)}"
        lines.append(f"  {loc}: {msg}")
    if len(lines) == 1:  # the common case: one mistake, one line
        return "invalid config: " + lines[0].strip()
    return "invalid config:\n" + "\n".join(lines)


def load_config(config: str | Path | None = None, overrides: list[str] | None = None) -> MucodeConfig:
    """Resolve defaults ← YAML (path or preset name) ← `key=value` overrides, and validate."""
    tree = _read_yaml(config) if config is not None else {}
    layer: dict[str, Any] = {}
    for override in overrides or []:
        _apply_override(layer, override)
    _merge_layer(tree, layer)
    try:
        return MucodeConfig.model_validate(tree)
    except ValidationError as err:
        raise ConfigError(_format_error(err)) from None
