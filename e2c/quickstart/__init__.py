"""The whole E2C life cycle in one command: ``bash scripts/quickstart.sh`` (``python -m e2c.quickstart``).

Stages, each in its own folder under the output folder: data, baseline, sft, eval_sft, filter, rl, eval_rl,
tts, (with ``--with-control``) control and eval_control, report. Every stage writes ``DONE.json`` when it
completes and is skipped on a rerun with the same settings; a finished stage asked to run with other settings
is refused in one line (``--from STAGE`` or ``--force`` redo it). A killed run resumes in the stage it was in.
Modules: :mod:`~e2c.quickstart.config` (settings), :mod:`~e2c.quickstart.plan` (which stages run),
:mod:`~e2c.quickstart.stages`, :mod:`~e2c.quickstart.report`, :mod:`~e2c.quickstart.cli`.
More: docs/quickstart.md.
"""
