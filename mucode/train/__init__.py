"""The staged μ-GRPO trainer: ``run_training(cfg)`` runs generate → verify → store →
optimize → checkpoint → hand over for every stage; ``mucode train`` is its command line.

Modules: ``loop`` (the stage loop, top to bottom), ``rollout_phase`` (generate + verify + store),
``optimize`` (one update), ``store`` (Parquet stage store), ``checkpoint``, ``verify`` (verifier
client pipeline), ``logger`` (metrics.jsonl / TensorBoard / wandb), ``plot``, ``summary``,
``distributed`` (torchrun + FSDP), ``commands`` (CLI).
Nothing is imported at package import time.
"""
