"""e3 curriculum: RL stages that couple a difficulty band with a response budget (``python -m e2c.rl.curriculum``).

Stage k trains on the rows of its difficulty band at its budget, from stage k-1's latest checkpoint (stage 1
from ``--model``), and validates at ``val_budget_factor`` x that budget in the same verl run: the rollout's
padded length is the validation budget, and each row carries its own ``extra_info.max_response_tokens``. The
curriculum file is checked once, by :func:`load_curriculum` (every key of :data:`TOP_KEYS`, :data:`STAGE_KEYS`,
:data:`BAND_KEYS`, of its type and range, else one line naming the file and field), then travels as a
:class:`Curriculum` that nothing re-checks. A killed stage resumes; a finished one (``CURRICULUM_DONE``) is
skipped.
More: docs/training.md, "RL on verl: GRPO, DAPO, the e3 curriculum".
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import EXISTING_FILE, INT_MAX, MODEL, OUTPUT_DIR, TEXT, at_least, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, from_flags, setting
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.core.files import check_output_dir
from e2c.core.paths import configs_dir, data_dir, project_root
from e2c.data.io import read_rows, write_parquet
from e2c.launch.checks import DATA_FILES, check_data_file, compose_checked
from e2c.launch.devices import gpu_count
from e2c.launch.lora import LoraSettings, add_lora_args, lora_flags, lora_overrides
from e2c.launch.tracking import DEFAULT_LOGGERS, LOGGER_HELP, tracker_names
from e2c.rl.launch import (
    DATA_SUFFIXES,
    cpu_overrides,
    default_sft_model,
    latest_hf_checkpoint,
    resolve_model_path,
)
from e2c.rl.launch import main as launch_main
from e2c.rl.settings import e2c_settings

DONE = "CURRICULUM_DONE"
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
ALGOS = ("grpo", "dapo")
E2C_STAGES = (1, 2)
MAX_BYTES = 1 << 20  # a curriculum is a few hundred bytes; a bigger file is not one
MAX_STAGES = 100  # e3 has 2; each stage's config is composed and checked before the first one starts
# The keys a curriculum file may have, at the top, in a stage and in a {min, max} band (anything else is a
# typo that would otherwise be ignored: refused, with these named).
TOP_KEYS = ("algo", "stage", "test_freq", "difficulty_field", "val_budget_factor", "overrides", "stages")
STAGE_KEYS = ("name", "difficulty", "max_response_length", "overrides")
BAND_KEYS = ("min", "max")
# A stage name is part of its folder (<output>/<NN>_<name>) and of a Hydra override (experiment_name).
STAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


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


# ------------------------------------------------------------------------------------------ the checked file
@dataclass(frozen=True)
class Band:
    """A stage's difficulty band, checked: every row (nothing set), the accepted ``values`` (as
    :func:`difficulty_value` reads them), or the inclusive range ``[low, high]`` (either end open)."""

    values: tuple[float | str, ...] = ()
    low: float | None = None
    high: float | None = None
    shown: str = "all"  # as the file wrote it, for messages

    @property
    def everything(self) -> bool:
        return not self.values and self.low is None and self.high is None

    def contains(self, value: Any) -> bool:
        """Whether a row's difficulty (any form: ``2``, ``"Level 3"``, ``"Hard"``) is in the band."""
        if self.everything:
            return True
        v = difficulty_value(value)
        if self.values:
            return v is not None and v in self.values
        if not isinstance(v, float):
            return False  # text with no number is outside any numeric band
        return (self.low is None or v >= self.low) and (self.high is None or v <= self.high)


@dataclass(frozen=True)
class Stage:
    """One curriculum stage: its rows (``band``) trained at ``max_response_length`` tokens."""

    name: str
    max_response_length: int
    band: Band = Band()
    overrides: tuple[str, ...] = ()


@dataclass(frozen=True)
class Curriculum:
    """A curriculum file, checked once when read (:func:`load_curriculum`); the rest of the module takes
    it as it is. Defaults are the file's when a key is left out."""

    stages: tuple[Stage, ...]
    algo: str = "grpo"
    stage: int = 2
    test_freq: int = 20
    difficulty_field: str = "difficulty"
    val_budget_factor: float = 2.0
    overrides: tuple[str, ...] = ()

    def val_budget(self, stage: Stage) -> int:
        """The validation budget of a stage: ``val_budget_factor`` x its training budget."""
        return round(stage.max_response_length * self.val_budget_factor)


def _shown(value: Any) -> str:
    """A value from the file as an error line shows it: ``null``, ``'abc'``, ``a list [1, 2]``."""
    if value is None:
        return "null"
    text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    if isinstance(value, Mapping):
        return f"a mapping {text}"
    if isinstance(value, list):
        return f"a list {text}"
    return text


def _known_keys(raw: Mapping[Any, Any], valid: tuple[str, ...], where: str) -> None:
    for key in raw:
        if key not in valid:
            raise UserError(f"{where}unknown key {_shown(key)}; valid keys: {', '.join(valid)}")


def _whole(value: Any, low: int, where: str) -> int:
    kind = whole(low)
    if isinstance(value, bool) or not isinstance(value, int):
        raise UserError(f"{where} must be {kind.name}, got {_shown(value)}")
    return int(kind.check(value, where))


def _factor(value: Any, where: str) -> float:
    kind = at_least(1)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{where} must be {kind.name}, got {_shown(value)}")
    return float(kind.check(value, where))


def _text(value: Any, where: str, what: str = "text") -> str:
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{where} must be {what}, got {_shown(value)}")
    return value


def _overrides(value: Any, where: str) -> tuple[str, ...]:
    """A list of Hydra overrides (null or left out: none); each is checked by Hydra with its stage."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise UserError(f"{where} must be a list of Hydra overrides (key=value), got {_shown(value)}")
    for i, item in enumerate(value):
        _text(item, f"{where}[{i}]", "a Hydra override (key=value) as text")
    return tuple(value)


def _bound(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise UserError(f"{where} must be a finite number (or null: open), got {_shown(value)}")
    return float(value)


def parse_band(value: Any, where: str) -> Band:
    """A stage's ``difficulty``: null or left out (every row), a list of accepted values, or ``{min, max}``
    (inclusive; either may be left out); an empty list or mapping takes every row too."""
    if value is None:
        return Band()
    if isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, bool) or not isinstance(item, str | int | float) or item != item:
                raise UserError(
                    f"{where}[{i}] must be a difficulty value (a number or text), got {_shown(item)}"
                )
        shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
        return Band(values=tuple(dict.fromkeys(difficulty_value(v) for v in value)), shown=shown)  # type: ignore[arg-type]
    if isinstance(value, Mapping):
        _known_keys(value, BAND_KEYS, f"{where}: ")
        low, high = _bound(value.get("min"), f"{where}.min"), _bound(value.get("max"), f"{where}.max")
        if low is not None and high is not None and low > high:
            raise UserError(f"{where}: min {value['min']} is above max {value['max']}; no row can be in it")
        shown = "{" + ", ".join(f"{k}: {value[k]}" for k in BAND_KEYS if value.get(k) is not None) + "}"
        return Band(low=low, high=high, shown=shown if shown != "{}" else "all")
    raise UserError(
        f"{where} must be a list of values or a mapping {{min, max}} (or null: every row), got {_shown(value)}"
    )


def parse_stage(raw: Any, i: int, source: str) -> Stage:
    where = f"{source}: stage {i}"
    if not isinstance(raw, Mapping):
        raise UserError(
            f"{where} must be a mapping (name, max_response_length, difficulty, overrides), got {_shown(raw)}"
        )
    if "name" not in raw:
        raise UserError(f"{where} needs a name")
    name = raw["name"]
    if not isinstance(name, str) or not STAGE_NAME.fullmatch(name):
        raise UserError(
            f"{where}: name must be a folder name of letters, digits, '_', '.' and '-' (at most 100, starting "
            f"with a letter or digit), got {_shown(name)}"
        )
    where = f"{where} ({name!r})"
    _known_keys(raw, STAGE_KEYS, f"{where}: ")
    if "max_response_length" not in raw:
        raise UserError(f"{where} needs max_response_length, its training budget in tokens")
    return Stage(
        name=name,
        max_response_length=_whole(raw["max_response_length"], 1, f"{where}: max_response_length"),
        band=parse_band(raw.get("difficulty"), f"{where}: difficulty"),
        overrides=_overrides(raw.get("overrides"), f"{where}: overrides"),
    )


def parse_curriculum(raw: Any, source: str) -> Curriculum:
    """A curriculum file's content (what YAML read) as a :class:`Curriculum`; a UserError line naming the
    file, the field and what it must be for anything else."""
    if not isinstance(raw, Mapping):
        raise UserError(
            f"{source}: expected a mapping at the top level (algo, stages, ...), got {_shown(raw)}"
        )
    _known_keys(raw, TOP_KEYS, f"{source}: ")
    for key in ("algo", "stage", "test_freq", "difficulty_field", "val_budget_factor"):
        if key in raw and raw[key] is None:
            raise UserError(
                f"{source}: {key} is empty (null); give a value or leave the key out for the default"
            )
    stages = raw.get("stages")
    if not isinstance(stages, list) or not stages:
        raise UserError(f"{source}: needs a non-empty 'stages' list, got {_shown(stages)}")
    if len(stages) > MAX_STAGES:
        raise UserError(f"{source}: {len(stages)} stages; a curriculum has at most {MAX_STAGES}")
    parsed = tuple(parse_stage(st, i, source) for i, st in enumerate(stages, 1))
    seen: set[str] = set()
    for st in parsed:
        if st.name in seen:
            raise UserError(f"{source}: stage name {st.name!r} is used twice")
        seen.add(st.name)
    algo = raw.get("algo", "grpo")
    if algo not in ALGOS:
        raise UserError(f"{source}: algo must be one of {', '.join(ALGOS)}, got {_shown(algo)}")
    e2c_stage = raw.get("stage", 2)
    if isinstance(e2c_stage, bool) or e2c_stage not in E2C_STAGES or not isinstance(e2c_stage, int):
        raise UserError(f"{source}: stage must be 1 or 2 (the e2c_stage settings), got {_shown(e2c_stage)}")
    cur = Curriculum(
        stages=parsed,
        algo=algo,
        stage=e2c_stage,
        test_freq=_whole(raw.get("test_freq", 20), 1, f"{source}: test_freq"),
        difficulty_field=_text(
            raw.get("difficulty_field", "difficulty"), f"{source}: difficulty_field", "a field name (text)"
        ),
        # The same types as flags: nan, inf and booleans are refused (nan < 1 is False, so nan would pass a
        # plain comparison and become a validation budget of nan tokens).
        val_budget_factor=_factor(raw.get("val_budget_factor", 2), f"{source}: val_budget_factor"),
        overrides=_overrides(raw.get("overrides"), f"{source}: overrides"),
    )
    for st in parsed:
        if st.max_response_length * cur.val_budget_factor > INT_MAX:  # before round(): inf would raise
            raise UserError(
                f"{source}: stage {st.name!r}: its validation budget, max_response_length {st.max_response_length} x "
                f"val_budget_factor {cur.val_budget_factor:g}, is over {INT_MAX} tokens"
            )
    return cur


def load_curriculum(path: str | Path) -> Curriculum:
    """Read and check a curriculum YAML file: one UserError line naming it for anything wrong with it."""
    import yaml

    path = Path(path)
    if path.is_dir():
        raise UserError(f"curriculum config {path} is a folder; give its YAML file")
    if not path.is_file():
        raise UserError(f"no curriculum config at {path}; the default is configs/e2c_curriculum.yaml")
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise UserError(
                f"{path}: {size:,} bytes is not a curriculum config (those are a few hundred bytes; at most {MAX_BYTES:,})"
            )
        data = path.read_bytes()
    except OSError as e:
        raise UserError(f"{path}: cannot read it ({e.strerror or e})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(
            f"{path}: not UTF-8 text (byte {e.start} is {data[e.start]:#04x}); a curriculum config is a YAML file"
        ) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UserError(f"{path}: not valid YAML{at}: {problem}") from None
    except RecursionError:
        raise UserError(f"{path}: nested too deeply to be a curriculum config") from None
    if raw is None:
        raise UserError(
            f"{path}: is empty; a curriculum needs a 'stages' list (see configs/e2c_curriculum.yaml)"
        )
    return parse_curriculum(raw, str(path))


# ------------------------------------------------------------------------------------------ rows and stages
def row_difficulty(row: Mapping[str, Any], field: str) -> Any:
    info = row.get("extra_info") or {}
    if not isinstance(info, Mapping):
        info = {}
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


def stage_rows(cur: Curriculum, stage: Stage, train: list[dict]) -> list[dict]:
    """The training rows of a stage's band; a UserError line naming the values present when there are none."""
    field = cur.difficulty_field
    picked = [r for r in train if stage.band.contains(row_difficulty(r, field))]
    if not picked:
        seen = sorted({str(difficulty_value(row_difficulty(r, field))) for r in train})
        raise UserError(
            f"stage {stage.name!r}: no training row has extra_info.{field} in {stage.band.shown}; "
            f"values present: {', '.join(seen[:12]) or 'none (no training rows)'}"
        )
    return picked


def stage_data(
    cur: Curriculum, stage: Stage, train: list[dict], val: list[dict], out: Path
) -> tuple[Path, Path, int]:
    """Write a stage's training rows (its band, its budget) and validation rows (every row, factor x budget)."""
    picked = stage_rows(cur, stage, train)
    val_budget = cur.val_budget(stage)
    train_path = write_parquet(with_budget(picked, stage.max_response_length), out / "train.parquet")
    val_path = write_parquet(with_budget(val, val_budget), out / "val.parquet")
    return train_path, val_path, val_budget


def launch_args(
    cur: Curriculum,
    stage: Stage,
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
    args = ["--algo", cur.algo, "--stage", str(cur.stage), "--model", model]
    args += ["--train-data", str(train_path), "--val-data", str(val_path), "--output-dir", str(out)]
    if steps:
        args += ["--steps", str(steps)]
    args += [
        "--logger",
        logger,
        *(lora or []),
        "--",
        f"data.max_response_length={val_budget}",
        f"trainer.experiment_name=e2c_curriculum_{stage.name}",
        *cur.overrides,
        *stage.overrides,
        *extra,
    ]
    return args


def check_inputs(cur: Curriculum, args: CurriculumSettings) -> tuple[list[dict], list[dict]]:
    """Everything a later stage would trip over, checked before stage 1 writes or trains anything: the
    data files, every stage's band (it has training rows), the start model, every stage's overrides
    (composed as that stage's launch will) and the output folder. Returns the training and validation rows."""
    rows: list[list[dict]] = []
    for value, what, flag in (
        (args.train_data, "training data", "--train-data (TRAIN_DATA)"),
        (args.val_data, "validation data", "--val-data (VAL_DATA)"),
    ):
        files = [p for p in value.split(",") if p]
        for f in files:
            check_data_file(f, what, "rl", DATA_SUFFIXES, flag)
        rows.append([dict(r) for f in files for r in read_rows(f)])
    train, val = rows
    for stage in cur.stages:  # a band with no row would stop the run after the stages before it trained
        try:
            stage_rows(cur, stage, train)
        except UserError as e:
            raise UserError(f"{args.config}: {e}") from None
    resolve_model_path(args.model)
    fixed = [f"e2c_stage=stage{cur.stage}"]
    if gpu_count() == 0:
        fixed += [f"{k}={v}" for k, v in cpu_overrides().items()]
    for stage in cur.stages:
        data = (Path("train.parquet"), Path("val.parquet"), cur.val_budget(stage))
        launch = launch_args(cur, stage, "model", data, Path("out"), args.steps, list(args.overrides))
        try:
            composed = compose_checked(
                configs_dir(), f"e2c_{cur.algo}", fixed, launch[launch.index("--") + 1 :]
            )
            e2c_settings(composed)
        except UserError as e:
            raise UserError(f"{args.config}: stage {stage.name!r}: {e}") from None
    check_output_dir(Path(args.output_dir), "output folder")  # made by the first stage's launch
    return train, val


def run_curriculum(
    cur: Curriculum,
    model: str,
    train: list[dict],
    val: list[dict],
    output_dir: Path,
    steps_per_stage: int = 0,
    extra: list[str] | None = None,
    launch: Any = None,
    logger: str = DEFAULT_LOGGERS,
    lora: list[str] | None = None,
) -> list[Path]:
    """Run every stage in order (skipping finished ones) on the checked rows; returns the stage run folders."""
    launch = launch or launch_main
    runs = []
    current = model
    n = len(cur.stages)
    for i, stage in enumerate(cur.stages, 1):
        out = output_dir / f"{i:02d}_{stage.name}"
        runs.append(out)
        if (out / DONE).is_file():
            print(f"[e2c-curriculum] stage {i}/{n} {stage.name}: done before, skipped", flush=True)
            current = str(latest_hf_checkpoint(out))
            continue
        data = stage_data(cur, stage, train, val, out / "data")
        print(
            f"[e2c-curriculum] stage {i}/{n} {stage.name}: difficulty {stage.band.shown}, "
            f"train budget {stage.max_response_length}, validation budget {data[2]}, from {current}",
            flush=True,
        )
        # Validation at the stage's end is the extrapolation number: test_freq > 0 makes verl validate on
        # the last step (the CPU preset turns validation off); the user's overrides still win.
        test_freq = steps_per_stage or cur.test_freq
        stage_extra = [f"trainer.test_freq={test_freq}"]
        stage_extra += [f"trainer.save_freq={steps_per_stage}"] if steps_per_stage else []
        rc = launch(
            launch_args(
                cur, stage, current, data, out, steps_per_stage, stage_extra + list(extra or []), logger, lora
            )
        )
        if rc != 0:
            raise UserError(f"stage {i} ({stage.name}) failed with exit {rc}; rerun to resume it")
        (out / DONE).write_text("ok\n")
        current = str(latest_hf_checkpoint(out))
    return runs


@dataclass(frozen=True)
class CurriculumSettings:
    """The curriculum's command line but LoRA's (:class:`e2c.launch.lora.LoraSettings`): each field is one flag."""

    config: str | None = field(
        default=None,
        metadata=setting(
            "curriculum YAML (default: configs/e2c_curriculum.yaml, e3's)",
            flag="--config",
            value=EXISTING_FILE,
        ),
    )
    model: str | None = field(
        default=None,
        metadata=setting(
            "stage-1 start model: tiny|embedded|folder|HF id (default models/checkpoints/sft/final)",
            flag="--model",
            value=MODEL,
        ),
    )
    train_data: str | None = field(
        default=None,
        metadata=setting(
            "RL parquet(s) (default data/processed/rl/e2c_rl_train.parquet)",
            flag="--train-data",
            value=DATA_FILES,
        ),
    )
    val_data: str | None = field(
        default=None,
        metadata=setting(
            "validation parquet(s) (default data/processed/rl/e2c_rl_val.parquet)",
            flag="--val-data",
            value=DATA_FILES,
        ),
    )
    output_dir: str | None = field(
        default=None,
        metadata=setting(
            "one sub-folder per stage (default models/checkpoints/rl/curriculum)",
            flag="--output-dir",
            value=OUTPUT_DIR,
        ),
    )
    steps: int = field(
        default=0,
        metadata=setting(
            "stop each stage after N steps (0: the config's epochs)", flag="--steps", value=whole(0)
        ),
    )
    logger: str = field(default=DEFAULT_LOGGERS, metadata=setting(LOGGER_HELP, flag="--logger", value=TEXT))
    overrides: tuple[str, ...] = field(
        default=(), metadata=setting("Hydra overrides for every stage, after --", flag="overrides", nargs="*")
    )


def with_defaults(args: CurriculumSettings) -> CurriculumSettings:
    """The folders the command line left out, under the project folder (:mod:`e2c.core.paths`)."""

    rl_data = data_dir() / "processed" / "rl"
    return replace(
        args,
        config=args.config or str(configs_dir() / "e2c_curriculum.yaml"),
        model=args.model or str(default_sft_model()),
        train_data=args.train_data or str(rl_data / "e2c_rl_train.parquet"),
        val_data=args.val_data or str(rl_data / "e2c_rl_val.parquet"),
        output_dir=args.output_dir or str(project_root() / "models" / "checkpoints" / "rl" / "curriculum"),
    )


def build_parser() -> ArgumentParser:
    """The curriculum's command line; every valued flag has its type (:mod:`e2c.commandline.argtypes`)."""
    p = ArgumentParser(prog="e2c_curriculum", description=__doc__.splitlines()[0])
    add_setting_flags(p, CurriculumSettings)
    add_lora_args(p)
    return p


def parse(argv: list[str] | None) -> tuple[CurriculumSettings, LoraSettings]:
    """The command line as its two checked settings objects."""
    ns = build_parser().parse_args(argv)
    return from_flags(ns, CurriculumSettings), from_flags(ns, LoraSettings)


def main(argv: list[str] | None = None) -> int:
    args, lora = parse(argv)
    tracker_names(args.logger)
    lora_overrides(lora, "actor_rollout_ref.model")  # bad LoRA values: one line before any stage
    args = with_defaults(args)
    cur = load_curriculum(args.config)  # checked here, once; the stages take it as it is
    train, val = check_inputs(cur, args)
    checks_done()
    runs = run_curriculum(
        cur,
        args.model,
        train,
        val,
        Path(args.output_dir).resolve(),
        args.steps,
        list(args.overrides),
        logger=args.logger,
        lora=lora_flags(lora),
    )
    print(f"[e2c-curriculum] finished {len(runs)} stages; last checkpoint in {runs[-1]}", flush=True)
    return 0


if __name__ == "__main__":
    run_main(main)
