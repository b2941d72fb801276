"""Persistence: atomic writes, checkpoints (verified pairs), one writer per run folder, run logs."""
