"""SFT and EF-SFT on verl's SFT trainer (``python -m verl.trainer.sft_trainer``).

- :mod:`e2c.sft.masks`: the pure loss-mask function (exploration-only rows) and its reference loop.
- :mod:`e2c.sft.dataset`: :class:`~e2c.sft.dataset.E2CSFTDataset`, a subclass of verl's multi-turn SFT
  dataset plugged in through ``data.custom_cls``; it applies each row's ``loss_scope``, handles over-long
  rows and reports the trained-token share.
- :mod:`e2c.sft.run`: the command line behind ``scripts/e2c_sft.sh`` and ``scripts/ef-sft.sh`` (launch,
  tagged base model, final Hugging Face folder).
"""
