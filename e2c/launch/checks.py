"""Checks the training launchers (``e2c.sft.run``, ``e2c.rl.launch``) run before anything starts.

verl's trainers take their settings as Hydra overrides and read the data in worker processes, so a typo in
an override or a wrong column ends, minutes later, in pages of traceback that do not name the culprit.
These checks compose the same config in-process (about a second, without importing verl) and read the data
files up front; every problem becomes one :class:`~e2c.core.errors.UserError` line naming the key or the file.
verl's own fields that users set most (learning rates, temperatures, lengths, batch sizes, clip ratios...) are
checked by the toolkit's value types, as flags are: :data:`VERL_FIELDS`, one table. Last, verl's own
dataclasses and validators (:func:`verl_rl_checks`, :func:`verl_sft_checks`) check the composed config as the
trainer would inside its ray driver or its ranks; they import verl, which takes about 10 s on a 2-core CPU
machine (measured 2026-11-27: ``python -c "import verl"`` 11-12 s), paid once before a run that then imports it
again in the trainer, and by every ``--dry-run``.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib.util
import io
import math
import os
import re
import sys
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import Number, ValueType, at_least, finite, positive, probability, whole
from e2c.core.errors import UserError

VERL_PKG_CONFIG = "pkg://verl.trainer.config"
_TYPE_NAMES = {bool: "a boolean (true/false)", int: "an integer", float: "a float"}


# ------------------------------------------------------------------------------------------------ values
# What Hydra's override grammar reads unquoted exactly as written (and what a path usually is): anything else
# (a space, a letter outside ASCII, a comma, a quote, brackets) goes in quotes.
_PLAIN_VALUE = re.compile(r"[A-Za-z0-9_./:+@%~-]+")


def hydra_value(text: str, suffix: str = "") -> str:
    """``text`` as the value of a Hydra override that reads back as ``text`` (then ``suffix``, which is
    Hydra syntax of the launcher's own, e.g. ``/${now:%H}``): as it is when Hydra reads it plainly, else in
    single quotes, so that researchers' folders (a space, an accented letter) reach verl intact. A literal
    ``${`` in ``text`` is escaped, so a path never turns into an interpolation.

    >>> hydra_value("/data/x.parquet"), hydra_value("/home/Zoë/my data"), hydra_value("4")
    ('/data/x.parquet', "'/home/Zoë/my data'", "'4'")
    """
    # A plain text Hydra reads as another type (an int, a bool, null: a folder named "2024", an environment
    # variable's "4", which ray refuses when it is not a string) or cannot read ("~") goes in quotes too.
    if _PLAIN_VALUE.fullmatch(text) and _reads_back(text, text):
        return text + suffix
    escaped = text.replace("${", "\\${")
    body = escaped.replace("'", "\\'")
    # Backslashes right before the closing quote would escape it: Hydra reads a doubled run as one.
    trailing = len(body) - len(body.rstrip("\\"))
    if trailing and not suffix:
        body += "\\" * trailing
    quoted = f"'{body}{suffix}'"
    # What Hydra reads back must be the text: a value it would read otherwise is refused, not passed on.
    if not _reads_back(quoted, escaped + suffix):
        raise UserError(f"Hydra cannot take the path {text!r} as a value: rename it (quotes and backslashes)")
    return quoted


def _reads_back(value: str, text: str) -> bool:
    """Hydra reads the override value ``value`` as the string ``text``."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        [override] = OverridesParser.create().parse_overrides([f"key={value}"])
    except HydraException:
        return False
    got = override.value()
    return isinstance(got, str) and got == text


def hydra_list(items: Sequence[str]) -> str:
    """Several values as one Hydra list (``[a,'b c']``); one value as itself."""
    if len(items) == 1:
        return hydra_value(items[0])
    return "[" + ",".join(hydra_value(i) for i in items) + "]"


@dataclass(frozen=True, repr=False)
class DataFiles(ValueType):
    """``--train-data`` / ``--val-data``: one or more data files, comma-separated (``none_ok``: or ``none``,
    no validation). The text is checked here (it names at least one file, UTF-8, no NUL); the files
    themselves (present, of a format the trainer reads, of the right schema) when the launcher plans the
    run, before anything starts."""

    none_ok: bool = False

    @property
    def name(self) -> str:  # type: ignore[override]
        return "data files, comma-separated" + (" (or 'none')" if self.none_ok else "")

    def parse(self, text: str) -> str:
        s = str(text)
        if "\0" in s:
            raise UserError(f"must be {self.name}, got a path with a NUL byte")
        try:
            s.encode("utf-8")
        except UnicodeEncodeError:
            raise UserError(f"must be UTF-8 paths (the trainer takes them as text), got {s!r}") from None
        if self.none_ok and s.strip().lower() == "none":
            return "none"
        files = [p.strip() for p in s.split(",") if p.strip()]
        if not files:
            raise UserError(f"must be {self.name}, got {s!r}, which names no file")
        return ",".join(files)


DATA_FILES = DataFiles()
DATA_FILES_OR_NONE = DataFiles(none_ok=True)


# ------------------------------------------------------------------------------------------------ Hydra
def verl_config_dir() -> Path:
    """verl's packaged config folder, found without importing verl (its import takes seconds and prints)."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("verl is not installed in this environment; install requirements.txt")
    return Path(next(iter(spec.submodule_search_locations))) / "trainer" / "config"


def _searchpath(config_dir: Path, config_name: str) -> list[str]:
    """The primary config's ``hydra.searchpath`` with verl's package path as a plain folder."""
    import yaml

    path = config_dir / f"{config_name}.yaml"
    if not path.is_file():
        raise UserError(f"no config {config_name}.yaml in {config_dir}")
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    entries = ((doc.get("hydra") or {}).get("searchpath") or []) if isinstance(doc, dict) else []
    return [f"file://{verl_config_dir()}" if e == VERL_PKG_CONFIG else str(e) for e in entries]


def _condense(e: BaseException) -> str:
    """Hydra's multi-line message in one line, without its config search path listing."""
    text = str(e).split("Config search path")[0]
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith("See https")]
    return "; ".join(lines).replace(":; ", ": ") or type(e).__name__


def _keys(node: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(node, dict):
        for k, v in node.items():
            key = f"{prefix}{k}"
            yield key
            yield from _keys(v, key + ".")


def closest_key(key: str, known: Sequence[str]) -> str | None:
    """The existing key a mistyped one most likely meant: one that ends with it (a missing prefix), else
    the nearest spelling."""
    ends = sorted((k for k in known if k.endswith("." + key)), key=len)
    if ends:
        return " or ".join(ends[:3])
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
    return close[0] if close else None


def _unknown_key_message(key: str, line: str, base: Any) -> str:
    from omegaconf import OmegaConf

    known = list(_keys(OmegaConf.to_container(base, resolve=False)))
    near = closest_key(key, known)
    hint = f"did you mean {near}? " if near else ""
    return f"unknown config key {key!r} in override {line!r}: {hint}to add a new key write +{line}"


def _type_problem(key: str, old: Any, new: Any, raw: str) -> str | None:
    """Why a new value does not fit the type of the config's value, or None."""
    if isinstance(new, str) and "${" in new:
        return None
    want = type(old)
    if want is bool:
        ok = isinstance(new, bool)
    elif want is int:
        # YAML often writes a float setting's default as 0: a float here is left to verl's dataclass.
        ok = isinstance(new, int | float) and not isinstance(new, bool)
    elif want is float:
        ok = isinstance(new, int | float) and not isinstance(new, bool)
    else:
        return None
    if ok:
        return None
    return f"{key}: {raw!r} is not {_TYPE_NAMES[want]} (the config's value is {old!r})"


@contextlib.contextmanager
def _quiet_fds() -> Iterator[None]:
    """Silence stdout and stderr at the file-descriptor level (verl's import prints warnings)."""
    saved = [os.dup(1), os.dup(2)]
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1)
        os.dup2(null, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def _target_node(cfg: Any, key: str) -> tuple[str, Any] | None:
    """The nearest enclosing node of ``key`` that names a dataclass in ``_target_``."""
    from omegaconf import DictConfig, OmegaConf

    parts = key.split(".")
    for n in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:n])
        node = OmegaConf.select(cfg, prefix, default=None)
        if isinstance(node, DictConfig) and isinstance(node.get("_target_"), str):
            return prefix, node
    return None


def _structured_problem(cfg: Any, key: str, line: str) -> str | None:
    """What verl's dataclass for the node around ``key`` rejects (as verl's omega_conf_to_dataclass would)."""
    found = _target_node(cfg, key)
    if found is None:
        return None
    prefix, node = found
    from hydra.utils import get_class
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        with _quiet_fds():
            cls = get_class(node["_target_"])
    except Exception:  # a target that does not load is verl's to report, not this check's
        return None
    # Nested sections with their own _target_ are their own dataclasses (verl instantiates them one by one).
    values = {
        k: v
        for k, v in OmegaConf.to_container(node, resolve=True).items()
        if not (isinstance(v, dict) and "_target_" in v)
    }
    try:
        schema = OmegaConf.structured(cls)
    except OmegaConfBaseException:
        return None  # a dataclass OmegaConf cannot express (verl builds it with hydra's instantiate)
    try:
        OmegaConf.merge(schema, OmegaConf.create(values))
    except OmegaConfBaseException as e:
        msg = str(e).splitlines()[0]
        return f"override {line!r}: {prefix} ({cls.__name__}) rejects it: {msg}"
    return None


def _fixed_problem(fixed: Sequence[str]) -> str | None:
    """The launcher's override Hydra cannot parse: a path of the user's with quotes, commas or brackets."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    for line in fixed:
        try:
            [override] = parser.parse_overrides([line])
        except HydraException:
            return f"Hydra cannot take {line!r}: use a path without quotes, commas, brackets or '='"
        if override.is_sweep_override():
            return f"Hydra reads the commas in {line!r} as a sweep: use a path without commas"
    return None


# ------------------------------------------------------------------------------------------------ verl's fields
COUNT = whole(1)
# verl's PPO trainer saves and validates only where the frequency is > 0 (ray_trainer.fit): -1 and 0 are never.
PPO_FREQ = whole(1, special=(-1, 0), meaning="-1 or 0: never")
# verl's SFT trainer takes a step count or the word after_each_epoch; -1 (any negative) is the last step only,
# and 0 a division by zero at the first step (sft_trainer: global_step % save_freq).
SFT_FREQ = whole(
    1, special=(-1,), words=("after_each_epoch",), meaning="-1: at the last step only, or after_each_epoch"
)

# The value type of verl's own settings, by key (a glob over the dotted key: ``**.`` is any leading sections,
# ``*`` any part of one key; ``sft:`` / ``ppo:``: in that trainer's config only, else in both). Checked in
# every composed config (compose_checked: the user's overrides, the config files, the launcher's own), after
# interpolations resolve; a null is verl's "unset" and left to verl. Types follow verl's semantics (0.9.1):
VERL_FIELDS: dict[str, ValueType] = {
    # The optimizer (FSDPOptimizerConfig): warm-up steps <= 0 take lr_warmup_steps_ratio of the steps
    # (engine/fsdp/transformer_impl.py); get_cosine_schedule_with_warmup asserts min_lr_ratio in [0, 1].
    "**.optim.lr": positive(),
    "**.optim.lr_warmup_steps_ratio": probability(),
    "**.optim.lr_warmup_steps": whole(
        1, special=(-1, 0), meaning="-1 or 0: lr_warmup_steps_ratio of the steps"
    ),
    "**.optim.min_lr_ratio": probability(),
    # Sizes and counts of both trainers (null steps: from the epochs).
    "data.train_batch_size": COUNT,
    "trainer.total_epochs": COUNT,
    "trainer.total_training_steps": COUNT,
    "trainer.n_gpus_per_node": COUNT,
    "trainer.nnodes": COUNT,
    # The SFT trainer (sft_trainer.py).
    "sft:data.micro_batch_size_per_gpu": COUNT,
    "sft:data.max_length": COUNT,
    "sft:data.max_token_len_per_gpu": COUNT,
    "sft:trainer.save_freq": SFT_FREQ,
    "sft:trainer.test_freq": SFT_FREQ,
    # The PPO trainer's lengths and batches (actor, reference, critic and reward-model rollout alike).
    "ppo:data.max_prompt_length": COUNT,
    "ppo:data.max_response_length": COUNT,
    "ppo:data.gen_batch_size": COUNT,
    "ppo:data.val_batch_size": COUNT,
    "ppo:**.rollout.prompt_length": COUNT,
    "ppo:**.rollout.response_length": COUNT,
    "ppo:**.rollout.max_model_len": COUNT,
    "ppo:**.rollout.max_num_batched_tokens": COUNT,
    "ppo:**.ppo_mini_batch_size": COUNT,
    "ppo:**.ppo_micro_batch_size": COUNT,
    "ppo:**.ppo_micro_batch_size_per_gpu": COUNT,
    "ppo:**.log_prob_micro_batch_size": COUNT,
    "ppo:**.log_prob_micro_batch_size_per_gpu": COUNT,
    "ppo:**.ppo_max_token_len_per_gpu": COUNT,
    "ppo:**.log_prob_max_token_len_per_gpu": COUNT,
    "ppo:**.ppo_epochs": COUNT,
    # verl splits each batch over these workers: 0 divides by zero or leaves the agent loop with none.
    "ppo:actor_rollout_ref.rollout.agent.num_workers": COUNT,
    "ppo:reward.num_workers": COUNT,
    "ppo:reward_model.num_workers": COUNT,
    # Sampling: the actor divides its logits by the rollout temperature (0 divides by zero); validation may
    # decode greedily (0, verl's default). top_k: -1 (vLLM) or 0 (HF) is no cut.
    "ppo:**.rollout.n": COUNT,
    "ppo:**.val_kwargs.n": COUNT,
    "ppo:**.rollout.temperature": positive(),
    "ppo:**.val_kwargs.temperature": at_least(0),
    "ppo:**.top_p": probability(open_zero=True),
    "ppo:**.top_k": whole(1, special=(-1, 0), meaning="-1 or 0: no top-k cut"),
    "ppo:**.rollout.gpu_memory_utilization": probability(open_zero=True),
    # The loss: PPO's clip range is [1 - low, 1 + high]; dual-clip asserts clip_ratio_c > 1 (core_algos). A
    # negative entropy coefficient (entropy minimisation) is a choice, not an error: any finite number.
    "ppo:**.clip_ratio": at_least(0),
    "ppo:**.clip_ratio_low": at_least(0),
    "ppo:**.clip_ratio_high": at_least(0),
    "ppo:**.clip_ratio_c": Number(float, low=1.0, low_open=True),
    "ppo:**.kl_loss_coef": at_least(0),
    "ppo:algorithm.kl_ctrl.kl_coef": at_least(0),
    "ppo:**.entropy_coeff": finite(),
    "ppo:algorithm.gamma": probability(),
    "ppo:algorithm.lam": probability(),
    "ppo:trainer.save_freq": PPO_FREQ,
    "ppo:trainer.test_freq": PPO_FREQ,
}
TRAINERS = ("sft", "ppo")
FINITE = finite()  # every other float of a config: nan and inf are refused everywhere


def trainer_of(values: Mapping[str, Any]) -> str:
    """``ppo`` for a config of verl's PPO trainer (it has ``actor_rollout_ref``), else ``sft``."""
    return "ppo" if "actor_rollout_ref" in values else "sft"


def field_pattern(pattern: str) -> tuple[str | None, str]:
    """``(trainer or None, glob)`` of a :data:`VERL_FIELDS` key."""
    trainer, sep, glob = pattern.partition(":")
    return (trainer, glob) if sep else (None, pattern)


def glob_regex(glob: str) -> re.Pattern[str]:
    """A :data:`VERL_FIELDS` glob as a regex for ``fullmatch`` on dotted keys."""
    out = re.escape(glob).replace(r"\*\*\.", "(?:[^.]+\\.)*")
    return re.compile(out.replace(r"\*", "[^.]*"))


@functools.lru_cache(maxsize=len(TRAINERS))
def _field_matcher(trainer: str) -> dict[str, list[tuple[re.Pattern[str], ValueType]]]:
    """The patterns that apply to ``trainer``'s config, in table order, by the last section of the keys they
    match (``*``: patterns whose last section is a wildcard): a key is tried against a few patterns only."""
    out: dict[str, list[tuple[re.Pattern[str], ValueType]]] = {}
    for pattern, kind in VERL_FIELDS.items():
        owner, glob = field_pattern(pattern)
        if owner in (None, trainer):
            last = glob.rsplit(".", 1)[-1]
            out.setdefault("*" if "*" in last else last, []).append((glob_regex(glob), kind))
    return out


def field_type(key: str, trainer: str) -> ValueType | None:
    """The :data:`VERL_FIELDS` type of a dotted key in ``trainer``'s config (the first pattern that
    matches), or None."""
    matcher = _field_matcher(trainer)
    for rx, kind in (*matcher.get(key.rsplit(".", 1)[-1], ()), *matcher.get("*", ())):
        if rx.fullmatch(key):
            return kind
    return None


def _fields(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every leaf of a resolved config, and of every section (a table key that holds
    a section instead of a number is refused too)."""
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for k, v in items:
        key = f"{prefix}[{k}]" if isinstance(node, list) else f"{prefix}.{k}" if prefix else str(k)
        yield key, v
        if isinstance(v, dict | list):
            yield from _fields(v, key)


def _override_of(key: str, given: Mapping[str, str]) -> str | None:
    """The user's override that set ``key`` (or a section holding it), if any."""
    hits = [k for k in given if key == k or key.startswith(k + ".")]
    return given[max(hits, key=len)] if hits else None


def _quoted(line: str, limit: int = 120) -> str:
    return repr(line if len(line) <= limit else line[: limit - 3] + "...")


def check_fields(values: Mapping[str, Any], given: Mapping[str, str] | None = None, source: str = "") -> None:
    """Every value of a resolved config (``OmegaConf.to_container(cfg, resolve=True)``) that
    :data:`VERL_FIELDS` types, by its type, and every other float as finite: one UserError line,
    ``override 'KEY=VALUE': KEY must be ..., got ...`` when an override of the user's (``given``: key ->
    override line) set it, else ``SOURCE: KEY must be ..., got ...``. The keys the user set go first."""
    given = given or {}
    trainer = trainer_of(values)
    fields = list(_fields(values))
    if given:
        fields.sort(key=lambda kv: _override_of(kv[0], given) is None)  # stable: config order otherwise
    for key, value in fields:
        if value is None:
            continue
        kind = field_type(key, trainer)
        if kind is None:
            if not (isinstance(value, float) and not math.isfinite(value)):
                continue
            kind = FINITE
        try:
            kind.check(value, key)
        except UserError as e:
            line = _override_of(key, given)
            where = f"override {_quoted(line)}" if line is not None else (source or "config")
            raise UserError(f"{where}: {e}") from None


def check_launcher_overrides(lines: Sequence[str]) -> None:
    """The overrides a launcher writes itself (paths of the user's among them) parse as Hydra will parse
    them in the trainer: one line naming the first that does not, before anything starts."""
    problem = _fixed_problem(lines)
    if problem:
        raise UserError(problem)


def parse_overrides(user: Sequence[str]) -> list[Any]:
    """The user's overrides as Hydra reads them (``hydra.core.override_parser.overrides_parser.Override``);
    one UserError line for the first Hydra cannot read."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    parser, parsed = OverridesParser.create(), []
    for line in user:
        try:
            parsed.extend(parser.parse_overrides([line]))
        except HydraException as e:
            raise UserError(
                f"malformed Hydra override: {_condense(e)} (overrides look like key=value)"
            ) from None
        except ValueError as e:  # a number Python will not convert (an int of over 4300 digits)
            raise UserError(
                f"Hydra cannot read the override {_quoted(line)}: {str(e).split(';')[0]}"
            ) from None
    return parsed


def compose_checked(config_dir: Path, config_name: str, fixed: Sequence[str], user: Sequence[str]) -> Any:
    """Compose ``config_name`` with the launcher's overrides and the user's, as the trainer will.

    Returns the composed config. Raises UserError naming the override for: a malformed override, an
    unknown key (with the closest existing key), a value whose type differs from the config's (an int or
    float key given text), a value verl's dataclass for that section rejects, a missing config group
    option, and an interpolation that does not resolve; then, interpolations resolved, a value outside its
    type in :data:`VERL_FIELDS` or a float that is nan or inf anywhere (:func:`check_fields`: naming the
    user's override when one set it, else the config).
    """
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    config_dir = Path(config_dir).resolve()
    search = [f"hydra.searchpath=[{','.join(_searchpath(config_dir, config_name))}]"]
    parsed = parse_overrides(user)
    # hydra.* settings (run folder, logging) are not part of the job's config.
    job_user = [o for o in parsed if not o.key_or_group.startswith("hydra.")]
    job_fixed = [o for o in fixed if not o.startswith(("hydra.", "+hydra."))]
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        try:
            base = compose(config_name, overrides=search + job_fixed)
        except (HydraException, OmegaConfBaseException) as e:
            raise UserError(
                _fixed_problem(fixed) or f"{config_dir / config_name}.yaml: {_condense(e)}"
            ) from None
        try:
            cfg = compose(config_name, overrides=search + job_fixed + [o.input_line for o in job_user])
        except (HydraException, OmegaConfBaseException) as e:
            msg = str(e)
            for o in job_user:
                if f"Could not override '{o.key_or_group}'" in msg:
                    raise UserError(_unknown_key_message(o.key_or_group, o.input_line, base)) from None
            raise UserError(f"bad Hydra override: {_condense(e)}") from None
    for o in job_user:
        if o.is_delete():
            continue
        old = OmegaConf.select(base, o.key_or_group, default=None)
        if o.is_add() or old is None:
            # A new key, a key whose default is null or a config group choice: verl's dataclass decides.
            problem = _structured_problem(cfg, o.key_or_group, o.input_line)
        else:
            problem = _type_problem(o.key_or_group, old, o.value(), o.get_value_element_as_str())
            if not problem and type(old) is int and isinstance(o.value(), float):
                problem = _structured_problem(cfg, o.key_or_group, o.input_line)
        if problem:
            raise UserError(problem)
    for o in job_user:
        try:
            OmegaConf.select(cfg, o.key_or_group, throw_on_resolution_failure=True)
        except OmegaConfBaseException as e:
            raise UserError(f"override {o.input_line!r} does not resolve: {str(e).splitlines()[0]}") from None
    try:
        values = OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as e:
        lines = str(e).splitlines()
        where = next((ln.split(":", 1)[1].strip() for ln in lines if ln.strip().startswith("full_key:")), "")
        raise UserError(f"config value {where or '?'} does not resolve: {lines[0]}") from None
    given = {o.key_or_group: o.input_line for o in job_user if not o.is_delete()}
    check_fields(values, given, f"{config_dir / config_name}.yaml as composed")
    return cfg


# ------------------------------------------------------------------------------------------------ verl's own checks
@contextlib.contextmanager
def quiet_verl() -> Iterator[None]:
    """verl prints and warns when imported and when it validates: keep that out of the one-line output."""
    sys.stdout.flush()  # what was printed before goes out before fd 1 points elsewhere
    sys.stderr.flush()
    with _quiet_fds(), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def first_line(e: BaseException) -> str:
    """The message of ``e`` on one line; for Hydra's "Error in call to target" wrapper, its cause's.

    >>> first_line(ValueError("bad value\\nmore"))
    'bad value'
    """
    cause = e.__cause__
    if cause is not None and "Error in call to target" in str(e):
        parts = str(e).split("'")
        return f"{parts[1]}: {first_line(cause)}" if len(parts) > 2 else first_line(cause)
    text = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
    if text:
        return text[0]
    frames = traceback.extract_tb(e.__traceback__) if e.__traceback__ else []
    if frames and frames[-1].line:  # a bare ``assert``: its source line says what failed
        return f"{type(e).__name__}: {frames[-1].line}"
    return type(e).__name__


def verl_sft_checks(cfg: Any, label: str) -> None:
    """The dataclasses ``verl.trainer.sft_trainer`` builds from the config (engine, optim, checkpoint,
    profiler; not the model's, which loads the tokenizer), their ``__post_init__`` checks included."""
    with quiet_verl():
        from verl.utils.config import omega_conf_to_dataclass
    for section in ("engine", "optim", "checkpoint", "profiler"):
        try:
            with quiet_verl():
                omega_conf_to_dataclass(cfg[section])
        except Exception as e:
            raise UserError(
                f"{label}: verl.utils.config.omega_conf_to_dataclass ({section}) refuses the configuration: "
                f"{first_line(e)}"
            ) from None


def verl_rl_checks(cfg: Any, label: str) -> None:
    """verl's own checks of a PPO config, as ``verl.trainer.main_ppo`` runs them before it starts ray:
    ``validate_config`` (the actor's and critic's dataclasses and ``validate``), then the rollout and
    algorithm dataclasses (the ``e2c`` settings group is :func:`e2c.rl.settings.e2c_settings`'s)."""
    with quiet_verl():
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.config import omega_conf_to_dataclass, validate_config
    steps = (
        (
            "validate_config",
            lambda: validate_config(
                cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg)
            ),
        ),
        ("omega_conf_to_dataclass (rollout)", lambda: omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)),
        ("omega_conf_to_dataclass (algorithm)", lambda: omega_conf_to_dataclass(cfg.algorithm)),
    )
    for name, call in steps:
        try:
            with quiet_verl():
                call()
        except Exception as e:
            raise UserError(
                f"{label}: verl.utils.config.{name} refuses the configuration: {first_line(e)}"
            ) from None


# ------------------------------------------------------------------------------------------------ files
# Files the paper's README names that its release never shipped and no script can rebuild as they were.
NOT_RELEASED = {
    "medical-train.parquet": "the paper's medical EF-SFT data was never released; build EF-SFT rows from "
    "your domain's E2C chains with e2c.data.efsft.build (bash scripts/prepare_all_data.sh builds "
    "data/processed/ef_sft/ef_sft.parquet from the math SFT set that way)",
}


def not_released(path: Path) -> str:
    """``: <why>`` for a missing file the paper names but never released (:data:`NOT_RELEASED`), else ''."""
    why = NOT_RELEASED.get(Path(path).name)
    return f": {why}" if why else ""


def check_data_file(path: str, what: str, schema: str, suffixes: Sequence[str], flag: str) -> None:
    """A data file the trainer will read: it exists, has a suffix the trainer reads, and fits ``schema``
    (e2c.data.schema's check); a missing column is named as such. ``flag`` picks another file."""

    p = Path(path).expanduser()
    if p.is_dir():
        raise UserError(f"{what} {path} is a folder; pass the data file(s) in it, comma-separated")
    if not p.is_file():
        if p.name in NOT_RELEASED:
            raise UserError(f"{what} {path} does not exist{not_released(p)}, or pass {flag}")
        raise UserError(
            f"{what} {path} does not exist; prepare it with bash scripts/prepare_all_data.sh or pass {flag}"
        )
    if p.suffix.lower() not in suffixes:
        raise UserError(
            f"{what} {path}: the trainer reads {' or '.join(suffixes)} files, not {p.suffix or 'no suffix'}"
        )
    # start-up: the schema brings the grader and the sandbox, which every launcher's --help would pay for
    from e2c.data.schema import SchemaError, validate_file

    try:
        validate_file(p, schema)
    except SchemaError as e:
        missing = _missing_column(p, str(e))
        raise UserError(f"{what} {missing or e}") from None


def _missing_column(path: Path, message: str) -> str | None:
    """'<file> has no column X' when a schema error is about a top-level column the file lacks."""
    if path.suffix.lower() != ".parquet" or "field '" not in message:
        return None
    import pyarrow.parquet as pq

    field = message.split("field '", 1)[1].split("'", 1)[0]
    column = field.split(".")[0].split("[")[0]
    names = pq.read_schema(path).names
    if column in names:
        return None
    return f"{path} has no column {column!r} (columns: {', '.join(names) or 'none'})"
