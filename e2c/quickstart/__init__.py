"""The whole E2C life cycle in one command: ``bash scripts/quickstart.sh`` (``python -m e2c.quickstart``).

Stages, in order, each in its own folder under the output folder (default ``outputs/quickstart``):

=========  ==================================================================================================
data       synthetic E2C tasks (a family/level mix a 135M model can learn, chains up to N tokens of the
           model's tokenizer), split by a hash of the problem text into SFT / RL / held-out eval (disjoint),
           plus the first GSM8K problems from the shared benchmark copy
baseline   ``python -m e2c.eval.run`` on the untrained model: held-out synthetic + GSM8K, greedy
sft        ``scripts/e2c_sft.sh`` (verl's SFT trainer) from the base model on the SFT split
eval_sft   the baseline's evaluation on the SFT model (same problems, settings and seed)
rl         ``scripts/e2c_rl.sh --stage 2`` (GRPO with exploration-advantage weighting) from the SFT model on
           the RL split
eval_rl    the same evaluation on the RL model
tts        ``python -m e2c.tts``: self-consistency against E2C methods at small budgets on the trained model
report     ``report.md``, ``report.json`` and PNG plots from the files the stages wrote
=========  ==================================================================================================

Every stage writes ``DONE.json`` (seconds, outputs, settings, commands) when it completes and is skipped on
a rerun with the same settings; a finished stage asked to run with other settings is refused with one line
(``--from STAGE`` redoes it and the stages after it, ``--force`` redoes everything). A killed run resumes
in the stage it was in: verl resumes SFT and RL from their checkpoints, evaluation and TTS from their
records. ``--fast`` runs the same stages on the tiny test model at tiny sizes (a few minutes).

Modules: :mod:`~e2c.quickstart.config` (settings and presets), :mod:`~e2c.quickstart.plan` (which stages
run), :mod:`~e2c.core.stats` (Wilson intervals, paired differences), :mod:`~e2c.quickstart.progress`
(subprocesses with progress and ETA), :mod:`~e2c.quickstart.stages` (the stages),
:mod:`~e2c.quickstart.report` (report and plots), :mod:`~e2c.quickstart.cli` (the command line).
"""
