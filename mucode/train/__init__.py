"""The staged μ-GRPO trainer: ``run_training(cfg)`` runs generate → verify → store →
optimize → checkpoint → hand over for every stage; ``mucode train`` is its command line.

Modules: ``loop`` (the stage loop, top to bottom: its named phases), ``prepare`` (everything before
the first stage: checks, data, policy, resume; the default verifier), ``rollout_phase`` (generate +
verify + store), ``optimize`` (one update), ``store`` (Parquet stage store, typed manifest),
``checkpoint`` (typed checkpoints), ``verify`` (verifier client pipeline), ``output`` (what rank 0
prints and writes; silent elsewhere), ``logger`` (metrics.jsonl / TensorBoard / wandb), ``plot``,
``summary`` (stage records, totals, the summary table),
``distributed`` (torchrun + FSDP), ``rollout_runner`` (engines per rank, data-parallel stores, weight
sync), ``aside`` (the trainer's state off the device during generation), ``precision`` (fp32 masters,
bf16 compute), ``commands`` (CLI), and the other methods' pipeline parts: ``compose`` (batch composer:
fresh, replay), ``sampling`` (sampling controller: fixed, agpo probe + per-prompt temperature),
``reference`` (the reference policy of a KL term), ``batch_inputs`` (groups, rewards, per-row data
for the objective), ``method_parts`` (building them from the config).
Nothing is imported at package import time.
"""
