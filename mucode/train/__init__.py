"""The staged μ-GRPO trainer: ``run_training(cfg)`` runs generate → verify → store →
optimize → checkpoint → hand over for every stage; ``mucode train`` is its command line.

Modules: ``loop`` (the stage loop, top to bottom), ``rollout_phase`` (generate + verify + store),
``optimize`` (one update), ``store`` (Parquet stage store), ``checkpoint``, ``verify`` (verifier
client pipeline), ``logger`` (metrics.jsonl / TensorBoard / wandb), ``plot``, ``summary``,
``distributed`` (torchrun + FSDP), ``rollout_runner`` (engines per rank, data-parallel stores, weight
sync), ``aside`` (the trainer's state off the device during generation), ``precision`` (fp32 masters,
bf16 compute), ``commands`` (CLI).
Nothing is imported at package import time.
"""
