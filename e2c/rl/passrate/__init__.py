"""Learnable RL prompts: keep the prompts the start model solves sometimes, but not always or never.

For each prompt of an RL parquet it samples ``k`` answers from the model RL starts from, built as the RL
rollout builds them, grades each with the RL reward, and keeps the prompts whose pass rate lies in ``--band``
(:data:`e2c.data.bands.BANDS`; default ``learnable``, 0 < p < 1) or, with ``--band varies``, whose reward
varies. Writes ``X.parquet`` (kept rows, ``extra_info.pass_rate`` added), ``X.passrate.json``,
``X.passrate.png`` and ``X.passrate.jsonl`` (per-prompt samples, appended batch by batch: a killed run
resumes, another ``--band`` costs no generation, and the reported cost is summed from its lines). Bad input,
and a band that keeps no prompt, is one ``error:`` line, exit 2, with no output written.
More: docs/data.md, "Learnable RL prompts: the pass-rate filter".
"""
