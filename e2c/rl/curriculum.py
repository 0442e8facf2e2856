"""e3 curriculum: RL stages that couple a difficulty band with a response budget (``python -m e2c.rl.curriculum``).

Stage k trains on the rows of its difficulty band at its budget, starting from stage k-1's latest
checkpoint (stage 1 from ``--model``), and validates on the validation rows at ``val_budget_factor`` x
that budget, so each stage reports how the policy extrapolates beyond the length it was trained at.

How the two budgets share one verl run: the rollout's ``response_length`` (the padded tensor size) is set
to the validation budget, and every row carries its own ``extra_info.max_response_tokens``, which the e2c
agent loop and reward manager honour (training rows: the stage budget; validation rows: the longer one).

The curriculum is resumable: verl resumes a killed stage from its latest checkpoint, and a finished stage
(``<output>/<stage>/CURRICULUM_DONE``) is skipped on the next run.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from e2c.argtypes import EXISTING_FILE, MODEL, OUTPUT_DIR, TEXT, at_least, whole
from e2c.cli import ArgumentParser
from e2c.entry import checks_done, run_main
from e2c.errors import UserError
from e2c.launch_checks import DATA_FILES
from e2c.lora import add_lora_args, lora_flags, lora_overrides
from e2c.tracking import DEFAULT_LOGGERS, LOGGER_HELP, tracker_names

DONE = "CURRICULUM_DONE"
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def difficulty_value(value: Any) -> float | str | None:
    """A row's difficulty as a number when it has one (``2``, ``"2"``, ``"Level 3"``), else the lowercased text."""
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    m = _NUMBER.search(text)
    return float(m.group()) if m else text.lower()


def in_band(value: Any, band: Any) -> bool:
    """Whether a difficulty is in a band: ``None``/empty (all), a list of accepted values, or ``{min, max}``."""
    if not band:
        return True
    v = difficulty_value(value)
    if isinstance(band, Mapping):
        if not isinstance(v, float):
            return False
        lo, hi = band.get("min"), band.get("max")
        return (lo is None or v >= float(lo)) and (hi is None or v <= float(hi))
    return v is not None and v in {difficulty_value(b) for b in band}


def row_difficulty(row: Mapping[str, Any], field: str) -> Any:
    info = row.get("extra_info") or {}
    for key in (field, "level"):
        if info.get(key) is not None:
            return info[key]
        if row.get(key) is not None:
            return row[key]
    return None


def with_budget(rows: Iterable[Mapping[str, Any]], budget: int) -> list[dict[str, Any]]:
    """Copies of RL rows whose ``extra_info.max_response_tokens`` is ``budget``."""
    out = []
    for row in rows:
        new = dict(row)
        new["extra_info"] = {**dict(row.get("extra_info") or {}), "max_response_tokens": int(budget)}
        out.append(new)
    return out


def validate_curriculum(cfg: Mapping[str, Any], source: str) -> None:
    """One clear line for a malformed curriculum config."""
    stages = cfg.get("stages")
    if not isinstance(stages, list) or not stages:
        raise UserError(f"{source}: needs a non-empty 'stages' list")
    names = set()
    for i, st in enumerate(stages, 1):
        if not isinstance(st, Mapping) or not st.get("name"):
            raise UserError(f"{source}: stage {i} needs a name")
        if st["name"] in names:
            raise UserError(f"{source}: stage name {st['name']!r} is used twice")
        names.add(st["name"])
        budget = st.get("max_response_length")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
            raise UserError(f"{source}: stage {st['name']!r} needs a positive integer max_response_length")
        band = st.get("difficulty")
        if band is not None and not isinstance(band, list | Mapping):
            raise UserError(
                f"{source}: stage {st['name']!r}: difficulty must be a list of values or {{min, max}}, got {band!r}"
            )
    # The same types as flags: nan, inf and booleans are refused (nan < 1 is False, so nan would pass a
    # plain comparison and become a validation budget of nan tokens).
    at_least(1).check(cfg.get("val_budget_factor", 2), f"{source}: val_budget_factor")
    if "test_freq" in cfg:
        whole(1).check(cfg["test_freq"], f"{source}: test_freq")
    if cfg.get("stage", 2) not in (1, 2):
        raise UserError(f"{source}: stage must be 1 or 2 (the e2c_stage settings), got {cfg.get('stage')!r}")
    if cfg.get("algo", "grpo") not in ("grpo", "dapo"):
        raise UserError(f"{source}: algo must be grpo or dapo, got {cfg.get('algo')!r}")


def load_curriculum(path: str | Path) -> dict[str, Any]:
    import yaml

    path = Path(path)
    if not path.is_file():
        raise UserError(f"no curriculum config at {path}; the default is configs/e2c_curriculum.yaml")
    try:
        cfg = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML ({e})") from None
    if not isinstance(cfg, dict):
        raise UserError(f"{path}: expected a mapping at the top level")
    validate_curriculum(cfg, str(path))
    return cfg


def stage_data(
    cfg: Mapping[str, Any], stage: Mapping[str, Any], train: list[dict], val: list[dict], out: Path
) -> tuple[Path, Path, int]:
    """Write a stage's training rows (its band, its budget) and validation rows (every row, factor x budget)."""
    from e2c.data.io import write_parquet

    field = str(cfg.get("difficulty_field", "difficulty"))
    budget = int(stage["max_response_length"])
    val_budget = round(budget * float(cfg.get("val_budget_factor", 2)))
    picked = [r for r in train if in_band(row_difficulty(r, field), stage.get("difficulty"))]
    if not picked:
        seen = sorted({str(difficulty_value(row_difficulty(r, field))) for r in train})
        raise UserError(
            f"stage {stage['name']!r}: no training row has extra_info.{field} in {stage.get('difficulty')!r}; "
            f"values present: {', '.join(seen[:12])}"
        )
    train_path = write_parquet(with_budget(picked, budget), out / "train.parquet")
    val_path = write_parquet(with_budget(val, val_budget), out / "val.parquet")
    return train_path, val_path, val_budget


def launch_args(
    cfg: Mapping[str, Any],
    stage: Mapping[str, Any],
    model: str,
    data: tuple[Path, Path, int],
    out: Path,
    steps: int,
    extra: list[str],
    logger: str = DEFAULT_LOGGERS,
    lora: list[str] | None = None,
) -> list[str]:
    """Arguments of :func:`e2c.rl.launch.main` for one stage (``logger``: its ``--logger``; ``lora``: its
    LoRA flags, each stage training a fresh adapter on the previous stage's merged model)."""
    train_path, val_path, val_budget = data
    args = ["--algo", str(cfg.get("algo", "grpo")), "--stage", str(cfg.get("stage", 2)), "--model", model]
    args += ["--train-data", str(train_path), "--val-data", str(val_path), "--output-dir", str(out)]
    if steps:
        args += ["--steps", str(steps)]
    args += [
        "--logger",
        logger,
        *(lora or []),
        "--",
        f"data.max_response_length={val_budget}",
        f"trainer.experiment_name=e2c_curriculum_{stage['name']}",
        *[str(o) for o in cfg.get("overrides") or []],
        *[str(o) for o in stage.get("overrides") or []],
        *extra,
    ]
    return args


def check_inputs(cfg: Mapping[str, Any], args: Any) -> None:
    """Everything a later stage would trip over, checked before stage 1 writes or trains anything: the
    data files, the start model, every stage's overrides (composed as that stage's launch will) and the
    output folder."""
    from e2c.devices import gpu_count
    from e2c.files import check_output_dir
    from e2c.launch_checks import check_data_file, compose_checked
    from e2c.paths import configs_dir
    from e2c.rl.launch import DATA_SUFFIXES, cpu_overrides, resolve_model_path
    from e2c.rl.settings import e2c_settings

    for value, what, flag in (
        (args.train_data, "training data", "--train-data (TRAIN_DATA)"),
        (args.val_data, "validation data", "--val-data (VAL_DATA)"),
    ):
        for f in (p for p in value.split(",") if p):
            check_data_file(f, what, "rl", DATA_SUFFIXES, flag)
    resolve_model_path(args.model)
    fixed = [f"e2c_stage=stage{cfg.get('stage', 2)}"]
    if gpu_count() == 0:
        fixed += [f"{k}={v}" for k, v in cpu_overrides().items()]
    for stage in cfg["stages"]:
        budget = int(stage["max_response_length"])
        data = (
            Path("train.parquet"),
            Path("val.parquet"),
            round(budget * float(cfg.get("val_budget_factor", 2))),
        )
        launch = launch_args(cfg, stage, "model", data, Path("out"), args.steps, list(args.overrides))
        try:
            composed = compose_checked(
                configs_dir(), f"e2c_{cfg.get('algo', 'grpo')}", fixed, launch[launch.index("--") + 1 :]
            )
            e2c_settings(composed)
        except UserError as e:
            raise UserError(f"stage {stage['name']!r}: {e}") from None
    check_output_dir(Path(args.output_dir), "output folder")  # made by the first stage's launch


def run_curriculum(
    cfg: Mapping[str, Any],
    model: str,
    train_data: str,
    val_data: str,
    output_dir: Path,
    steps_per_stage: int = 0,
    extra: list[str] | None = None,
    launch: Any = None,
    logger: str = DEFAULT_LOGGERS,
    lora: list[str] | None = None,
) -> list[Path]:
    """Run every stage in order (skipping finished ones); returns the stage run folders."""
    from e2c.data.io import read_rows
    from e2c.rl.launch import latest_hf_checkpoint
    from e2c.rl.launch import main as launch_main

    launch = launch or launch_main
    train = [dict(r) for p in train_data.split(",") for r in read_rows(p)]
    val = [dict(r) for p in val_data.split(",") for r in read_rows(p)]
    runs = []
    current = model
    n = len(cfg["stages"])
    for i, stage in enumerate(cfg["stages"], 1):
        out = output_dir / f"{i:02d}_{stage['name']}"
        runs.append(out)
        if (out / DONE).is_file():
            print(f"[e2c-curriculum] stage {i}/{n} {stage['name']}: done before, skipped", flush=True)
            current = str(latest_hf_checkpoint(out))
            continue
        data = stage_data(cfg, stage, train, val, out / "data")
        print(
            f"[e2c-curriculum] stage {i}/{n} {stage['name']}: difficulty {stage.get('difficulty') or 'all'}, "
            f"train budget {stage['max_response_length']}, validation budget {data[2]}, from {current}",
            flush=True,
        )
        # Validation at the stage's end is the extrapolation number: test_freq > 0 makes verl validate on
        # the last step (the CPU preset turns validation off); the user's overrides still win.
        test_freq = steps_per_stage or int(cfg.get("test_freq", 20))
        stage_extra = [f"trainer.test_freq={test_freq}"]
        stage_extra += [f"trainer.save_freq={steps_per_stage}"] if steps_per_stage else []
        rc = launch(
            launch_args(
                cfg, stage, current, data, out, steps_per_stage, stage_extra + list(extra or []), logger, lora
            )
        )
        if rc != 0:
            raise UserError(f"stage {i} ({stage['name']}) failed with exit {rc}; rerun to resume it")
        (out / DONE).write_text("ok\n")
        current = str(latest_hf_checkpoint(out))
    return runs


def with_defaults(args: Any) -> None:
    """Fill the folders the command line left out, under the project folder (:mod:`e2c.paths`)."""
    from e2c.paths import configs_dir, data_dir, project_root
    from e2c.rl.launch import default_sft_model

    rl_data = data_dir() / "processed" / "rl"
    args.config = args.config or str(configs_dir() / "e2c_curriculum.yaml")
    args.model = args.model or str(default_sft_model())
    args.train_data = args.train_data or str(rl_data / "e2c_rl_train.parquet")
    args.val_data = args.val_data or str(rl_data / "e2c_rl_val.parquet")
    args.output_dir = args.output_dir or str(project_root() / "models" / "checkpoints" / "rl" / "curriculum")


def build_parser() -> ArgumentParser:
    """The curriculum's command line; every valued flag has its type (:mod:`e2c.argtypes`)."""
    p = ArgumentParser(prog="e2c_curriculum", description=__doc__.splitlines()[0])
    p.add_argument(
        "--config",
        type=EXISTING_FILE,
        default=None,
        help="curriculum YAML (default: configs/e2c_curriculum.yaml, e3's)",
    )
    p.add_argument(
        "--model",
        type=MODEL,
        default=None,
        help="stage-1 start model: tiny|embedded|folder|HF id (default models/checkpoints/sft/final)",
    )
    p.add_argument(
        "--train-data",
        type=DATA_FILES,
        default=None,
        help="RL parquet(s) (default data/processed/rl/e2c_rl_train.parquet)",
    )
    p.add_argument(
        "--val-data",
        type=DATA_FILES,
        default=None,
        help="validation parquet(s) (default data/processed/rl/e2c_rl_val.parquet)",
    )
    p.add_argument(
        "--output-dir",
        type=OUTPUT_DIR,
        default=None,
        help="one sub-folder per stage (default models/checkpoints/rl/curriculum)",
    )
    p.add_argument(
        "--steps",
        type=whole(0),
        default=0,
        help="stop each stage after N steps (0: the config's epochs)",
    )
    p.add_argument("--logger", type=TEXT, default=DEFAULT_LOGGERS, help=LOGGER_HELP)
    add_lora_args(p)
    p.add_argument("overrides", nargs="*", help="Hydra overrides for every stage, after --")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    tracker_names(args.logger)
    lora_overrides(args, "actor_rollout_ref.model")  # bad LoRA values: one line before any stage
    with_defaults(args)
    cfg = load_curriculum(args.config)
    check_inputs(cfg, args)
    checks_done()
    runs = run_curriculum(
        cfg,
        args.model,
        args.train_data,
        args.val_data,
        Path(args.output_dir).resolve(),
        args.steps,
        args.overrides,
        logger=args.logger,
        lora=lora_flags(args),
    )
    print(f"[e2c-curriculum] finished {len(runs)} stages; last checkpoint in {runs[-1]}", flush=True)
    return 0


if __name__ == "__main__":
    run_main(main)
