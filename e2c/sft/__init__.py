"""SFT and EF-SFT on verl's SFT trainer (``python -m verl.trainer.sft_trainer``).

- :mod:`e2c.sft.masks`: the pure loss-mask function (exploration-only rows) and its reference loop.
- :mod:`e2c.sft.dataset`: :class:`~e2c.sft.dataset.E2CSFTDataset`, a subclass of verl's multi-turn SFT
  dataset plugged in through ``data.custom_cls``; it applies each row's ``loss_scope``, handles over-long
  rows and reports the trained-token share.
- :mod:`e2c.sft.run`: the command line behind ``scripts/e2c_sft.sh`` and ``scripts/ef-sft.sh``; it calls
  :mod:`e2c.sft.launch` (the run's plan, Hydra overrides, ``torchrun`` command), :mod:`e2c.sft.tagging`
  (a base model with the E2C tags), :mod:`e2c.sft.metrics` (losses from verl's file logger) and
  :mod:`e2c.sft.export` (the final Hugging Face folder).
"""
