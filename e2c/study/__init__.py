"""Studies: a researcher's own ablations of SFT length and RL recipes, ``python -m e2c.study --study FILE``.

A study file declares a base (the quickstart's settings) and named arms (``sft``, ``rl``, ``sft_continue``,
``sft_matched``), each run for a list of seeds. The study runs every arm's seeds in their own resumable
folders through the toolkit's entry points, screens every arm on a validation split (new synthetic
problems, not the held-out set), confirms the chosen arms with their starts and equal-token SFT arms on the
held-out set with fresh sampling seeds, and writes one report (``study.md``, ``study.json``). docs/study.md is the manual.

Modules: :mod:`~e2c.study.spec` (the study file, checked once), :mod:`~e2c.study.units` (the units, their
settings, what a run does with each), :mod:`~e2c.study.work` (their commands and work),
:mod:`~e2c.study.report` (the report), :mod:`~e2c.study.cli` (the command line).
"""
