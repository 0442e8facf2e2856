"""Test-time scaling: accuracy against generated tokens for the registered search methods.

    python -m e2c.tts [--methods ...] [--budgets 4 8 16 32] [--limit N] [--dataset aime24] [--model ...]
                      [--backend ...] [--config tts/config/tts.yaml] [--set key=value ...] [--sandbox SPEC]

``python tts/run_tts.py`` (the paper's command) is the same program. Defaults come from ``tts/config/tts.yaml``
(relative paths are the project's, :func:`e2c.core.paths.project_root`); flags override them, ``--set``
overrides method settings. A rerun with the same settings resumes per (method, budget, problem); Ctrl-C or
SIGTERM names what was saved (exit 130 / 143). The last line printed is one JSON object with the results'
paths and the summary. The methods and their traits come from the registry (:func:`e2c.tts.base.register`).
More: docs/test-time-scaling.md.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import (
    ANY_TEXT,
    EXISTING_DIR,
    EXISTING_FILE,
    MODEL,
    OUTPUT_DIR,
    TEXT,
    Choice,
    ValueType,
    whole,
)
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, flag_fields, flag_values, setting
from e2c.commandline.parsing import (
    DTYPES,
    ArgumentParser,
    count_lines,
    exit_interrupted,
    interrupt_on_sigterm,
    plural,
    quiet_libraries,
    resume_command,
    slug,
)
from e2c.core.errors import UserError
from e2c.core.files import check_output_dir
from e2c.core.models import default_subfolder, resolve_model
from e2c.core.paths import project_root
from e2c.core.run_folder import FORCE_HELP
from e2c.data.registry import load_benchmark
from e2c.generation import ALIASES as BACKEND_ALIASES
from e2c.generation import BACKENDS, make_generator, pick_backend
from e2c.launch.tracking import RESULT_TRACKERS, RESULTS_LOGGER_HELP, log_results, result_trackers
from e2c.rewards.kinds import runs_programs
from e2c.sandbox import SANDBOX_HELP, Sandbox, SandboxSpec, use
from e2c.sandbox import setting as sandbox_setting
from e2c.tts import TTSSettings
from e2c.tts.base import METHODS, SETTING_ALIASES, canonical_settings, methods_with
from e2c.tts.run import (
    SETTING_DEFAULTS,
    check_budgets,
    check_methods,
    check_methods_list,
    check_run_folder,
    check_setting,
    format_table,
    load_embedder,
    read_done,
    run_tts,
    selected_results,
    settings_from,
)
from e2c.tts.run import tracker_payload as tts_payload
from e2c.view import write_view

PROG = "python -m e2c.tts"
ENTRY = ("-m", "e2c.tts")  # what follows the interpreter in the command that resumes a run


def joined(names: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``: names as a sentence writes them."""
    return " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


class MethodName(ValueType):
    """A registered TTS method (:data:`e2c.tts.base.METHODS`, read when checked: a method registered after
    the parser was built is accepted too)."""

    name = "a registered TTS method"

    def parse(self, text: str) -> str:
        s = str(text)
        if s not in METHODS:
            raise UserError(
                f"must be a registered TTS method, got {s!r}; valid: {', '.join(sorted(METHODS))}"
            )
        return s


class SettingValue(ValueType):
    """``--set KEY=VALUE``: a TTS setting (an old name too, :data:`e2c.tts.base.SETTING_ALIASES`) and its
    value, checked with the type the setting declares; parsed to ``(key, value)``."""

    name = "KEY=VALUE with a TTS setting"

    def parse(self, text: str) -> tuple[str, Any]:

        s = str(text)
        if "=" not in s:
            raise UserError(f"must be KEY=VALUE (a TTS setting and its value), got {s!r}")
        k, v = s.split("=", 1)
        key = SETTING_ALIASES.get(k.strip(), k.strip())  # an old name sets the same knob as its new one
        if key not in SETTING_DEFAULTS:
            raise UserError(
                f"{s}: unknown TTS setting {k.strip()!r}; valid: {', '.join(sorted(SETTING_DEFAULTS))}"
            )
        try:
            return key, check_setting(key, set_value(key, v))
        except UserError as e:
            raise UserError(f"{s}: {e}") from None


@dataclass(frozen=True)
class RunSettings:
    """The run's settings that the config file (``tts/config/tts.yaml``) holds and a flag of the same name
    overrides; each field is its flag, declared here once (help line, value type). A flag not given leaves
    the config's value; the config's values are checked with the same types (:func:`load_config`)."""

    methods: tuple[str, ...] | None = field(
        default=None,
        metadata=setting(
            lambda: f"methods to run, of: {', '.join(sorted(METHODS))} (default: the config's ten)",
            flag="--methods",
            value=MethodName(),
        ),
    )
    budgets: tuple[int, ...] | None = field(
        default=None, metadata=setting("K/N values (default: 4 8 16 32)", flag="--budgets", value=whole(1))
    )
    limit: int | None = field(
        default=None,
        metadata=setting("first N problems (default: the config's; 0 = all)", flag="--limit", value=whole(0)),
    )
    dataset: str | None = field(
        default=None, metadata=setting("benchmark name (default: aime24)", flag="--dataset", value=TEXT)
    )
    data_dir: str | None = field(
        default=None,
        metadata=setting(
            "folder with local benchmark files (default: the config's)", flag="--data-dir", value=EXISTING_DIR
        ),
    )
    model: str | None = field(
        default=None,
        metadata=setting(
            "model: HF id, folder, embedded, tiny (default: the released 8B)", flag="--model", value=MODEL
        ),
    )
    subfolder: str | None = field(
        default=None,
        metadata=setting(
            "model subfolder (default: 8B for the released checkpoint, else none)",
            flag="--subfolder",
            value=ANY_TEXT,
        ),
    )
    backend: str | None = field(
        default=None,
        metadata=setting(
            "auto, vllm or hf (default: auto)",
            flag="--backend",
            value=Choice((*BACKENDS, *BACKEND_ALIASES), "backend"),
        ),
    )
    output_dir: str | None = field(
        default=None,
        metadata=setting("results root (default: tts/outputs)", flag="--output-dir", value=OUTPUT_DIR),
    )
    dtype: str | None = field(
        default=None,
        metadata=setting(
            "model dtype: auto, float32, bfloat16, float16 (default: auto)",
            flag="--dtype",
            value=Choice(DTYPES, "dtype"),
        ),
    )


# The config's values of these are names relative to the project (paths) or resolved later (the model):
# checked as text here, as files where they are used.
CONFIG_TEXT_KEYS = ("data_dir", "model", "output_dir")


def _nested_help() -> str:
    return (
        f"{joined(methods_with('nestable'))} run at the largest budget only; smaller budgets are read off its "
        "first k samples (default: off, every budget sampled afresh)"
    )


@dataclass(frozen=True)
class RunControl:
    """How this command runs, beside the config's settings (:class:`RunSettings`): where its defaults come
    from, how many problems at once, method settings set by hand, where programs run, what else it writes.
    Each field is its flag, declared here once; the command reads them as one checked object."""

    config: str | None = field(
        default=None,
        metadata=setting(
            "defaults (YAML) (default: tts/config/tts.yaml of the project)",
            flag="--config",
            value=EXISTING_FILE,
        ),
    )
    workers: int | None = field(
        default=None,
        metadata=setting(
            "problems run at once, their generation calls batched together (default: 16 on vllm, 1 on hf)",
            flag="--workers",
            value=whole(1),
        ),
    )
    sets: tuple[tuple[str, Any], ...] = field(
        default=(),
        metadata=setting(
            "override a method setting, e.g. explore_budget=256 (repeatable)",
            flag="--set",
            repeat=True,
            metavar="KEY=VALUE",
            value=SettingValue(),
        ),
    )
    nested_budgets: bool = field(default=False, metadata=setting(_nested_help, flag="--nested-budgets"))
    logger: str = field(
        default="", metadata=setting(RESULTS_LOGGER_HELP, flag="--logger", value=RESULT_TRACKERS)
    )
    view: bool = field(
        default=False,
        metadata=setting(
            "after the results, write <run folder>/view.html: one self-contained page of every method's "
            "chains per problem (python -m e2c.view)",
            flag="--view",
        ),
    )
    force: bool = field(default=False, metadata=setting(FORCE_HELP, flag="--force"))
    sandbox: str | None = field(
        default=None, metadata=setting(SANDBOX_HELP, flag="--sandbox", metavar="SPEC", value=TEXT)
    )


def build_parser(prog: str = PROG) -> ArgumentParser:
    """The TTS command line (:class:`RunSettings` and :class:`RunControl`, each flag declared once);
    ``prog`` names the entry in usage and error lines (the shim passes its own). The registered methods and
    the nestable ones are read from the registry, so a new method shows up here with nothing else edited."""
    p = ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    add_setting_flags(p, RunSettings)
    add_setting_flags(p, RunControl)
    return p


def use_sandbox(
    spec: SandboxSpec | None, records: Sequence[Any], log: Callable[[str], None] = print
) -> Sandbox | None:
    """The run's sandbox, built once when a problem's answers are programs; None for a run with none
    (nothing to run, and no backend to probe). Building it may refuse in one line (bubblewrap missing), so
    it happens before anything is written."""
    if not runs_programs(r.kind for r in records):
        return None
    return use(spec, log, "tts")


def parse_args(argv: list[str] | None = None, prog: str = PROG):
    """The flags of ``argv`` (default: the command line's)."""
    return build_parser(prog).parse_args(argv)


def run_control(args) -> RunControl:
    """The command's :class:`RunControl`, from flags already checked by their types."""
    return RunControl(**flag_fields(args, RunControl))


def load_config(args) -> dict:
    """The config file with the flags on top; every value checked before anything is loaded or written."""
    import yaml

    control = run_control(args)
    path = Path(control.config) if control.config else project_root() / "tts" / "config" / "tts.yaml"
    if not path.is_file():
        raise UserError(f"no TTS config at {path}")
    try:
        cfg = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise UserError(f"--config {path}: not readable YAML ({type(e).__name__})") from None
    if not isinstance(cfg, dict):
        raise UserError(f"--config {path}: expected a mapping of settings, got {type(cfg).__name__}")
    if cfg.get("model_path"):  # the paper's README sets model_path (and subfolder) in this file
        cfg["model"] = cfg["model_path"]
    for key, val in flag_values(args, RunSettings).items():
        if val is not None:
            cfg[key] = (
                list(val) if isinstance(val, list | tuple) else str(val) if isinstance(val, Path) else val
            )
    # The config's values get the flags' own types (the flags' were checked as they were parsed); a list's
    # shape first, then each item.
    cfg["methods"] = check_methods_list(cfg.get("methods"))
    cfg["budgets"] = check_budgets(cfg.get("budgets"))
    for key in ("dataset", "model"):
        if not isinstance(cfg.get(key), str) or not cfg[key].strip():
            raise UserError(f"--{key} is missing or empty (config {path})")
    for f in fields(RunSettings):
        value = cfg.get(f.name)
        if value is None or f.name in ("methods", "budgets"):
            continue
        kind = ANY_TEXT if f.name in CONFIG_TEXT_KEYS else f.metadata["value"]
        kind.check(value, f"{f.name} (config {path})")
    settings = cfg.get("settings") or {}
    if not isinstance(settings, dict):
        raise UserError(f"--config {path}: 'settings' must be a mapping, got {type(settings).__name__}")
    try:
        settings = canonical_settings(settings)
    except ValueError as e:
        raise UserError(f"--config {path}: {e}") from None
    for key, value in control.sets:  # checked as parsed (SettingValue)
        settings[key] = value
    cfg["settings"] = settings
    return cfg


def set_value(key: str, text: str):
    """A ``--set`` value: YAML for numbers, the text as written for text settings (an opener of ``1.``
    or ``no`` stays text)."""
    import yaml

    if isinstance(getattr(TTSSettings, key, None), str):
        return text
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return text  # reported by the setting's own check, with its name


def out_root(path: str, from_flag: bool) -> Path:
    """A relative --output-dir is taken from the working directory; the config's, from the repository."""
    p = Path(path)
    return p if p.is_absolute() or from_flag else project_root() / p


def main(argv: list[str] | None = None, prog: str = PROG, entry: Sequence[str] = ENTRY) -> int:
    """The TTS run; ``prog`` and ``entry`` (what follows the interpreter in the printed resume command)
    name the command the user typed: ``python -m e2c.tts`` here, ``tts/run_tts.py`` through the shim.

    Everything that can be refused is refused before :func:`e2c.commandline.entry.checks_done`: the flags by their
    types, the config's values by the same ones, the data, the output folder, the model folder and an
    earlier run in the folder with other settings; then the model loads."""

    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv, prog)
    control = run_control(args)
    spec = sandbox_setting(control.sandbox)  # the edge: a bad value is refused before anything is read
    quiet_libraries()
    trackers = result_trackers(control.logger)
    cfg = load_config(args)
    cfg["subfolder"] = default_subfolder(cfg["model"], cfg.get("subfolder"))
    methods = check_methods(cfg["methods"])
    budgets = cfg["budgets"]
    settings = settings_from(cfg["settings"])
    backend = pick_backend(cfg.get("backend") or "auto")
    records = load_benchmark(cfg["dataset"], cfg.get("data_dir"), cfg.get("limit") or None)
    model_name = Path(cfg["model"]).name if Path(cfg["model"]).exists() else cfg["model"]
    out_dir = (
        out_root(cfg.get("output_dir") or "tts/outputs", from_flag=args.output_dir is not None)
        / slug(cfg["dataset"])
        / slug(model_name + (f"-{cfg['subfolder']}" if cfg.get("subfolder") else ""))
    )
    check_output_dir(out_dir, "--output-dir")
    res = resolve_model(cfg["model"], cfg.get("subfolder") or None)
    run_cfg = {
        "dataset": cfg["dataset"],
        "model": cfg["model"],
        "subfolder": cfg.get("subfolder"),
        "backend": backend,  # the generator's name (hf, vllm), as recorded below
        "limit": cfg.get("limit"),
        "settings": settings.to_dict(),
    }
    if control.nested_budgets:  # recorded only when on: a folder without the key is a run with it off
        run_cfg["nested_budgets"] = True
    # The sandbox is not in run_cfg (the run's identity): where programs run does not change results.
    check_run_folder(out_dir, run_cfg, control.force)
    sandbox = use_sandbox(spec, records)
    checks_done()
    interrupt_on_sigterm()
    try:
        gen, _ = make_generator(backend, res.path, None, seed=settings.seed, dtype=cfg.get("dtype") or "auto")
        embed = load_embedder(settings.embedder) if methods_with("needs_embedder", methods) else None
        run_cfg["backend"] = gen.name
        workers = control.workers if control.workers is not None else (16 if gen.name == "vllm" else 1)
        rows = run_tts(
            gen,
            records,
            methods,
            budgets,
            settings,
            out_dir,
            run_cfg,
            embed,
            workers=workers,
            nested=control.nested_budgets,
            force=control.force,
            sandbox=sandbox,
        )
        if trackers:
            results = selected_results(read_done(out_dir / "records.jsonl"), methods, budgets, records)
            scalars, samples = tts_payload(rows, results)
            log_results(trackers, out_dir, f"tts-{slug(cfg['dataset'])}", scalars, samples)
    except KeyboardInterrupt as e:  # the guard's line would not say what was saved or how to resume
        rec = out_dir / "records.jsonl"
        n = count_lines(rec)
        saved = f"{plural(n, 'result')} saved in {rec}" if n else "no results saved yet"
        exit_interrupted(e, saved, resume_command(list(entry), argv))
    if control.view:  # after the results are written: a page that cannot be built loses nothing of the run
        write_view([out_dir], out_dir / "view.html")
        print(f"view: {out_dir / 'view.html'}")
    print(format_table(rows))
    print(
        json.dumps(
            {
                "results": str(out_dir / "results.json"),
                "csv": str(out_dir / "results.csv"),
                "plot": str(out_dir / "accuracy_vs_tokens.png"),
                "summary": rows,
            }
        )
    )
    return 0


if __name__ == "__main__":
    run_main(main)
