"""``python -m e2c.rl.passrate``: the filter's flags (:class:`RunControl`, the settings of
:class:`~e2c.rl.passrate.config.FilterConfig`), its run and its one-line errors.
More: docs/data.md, "Learnable RL prompts: the pass-rate filter".
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2c.chain import FORMATS
from e2c.commandline.argtypes import (
    EXISTING_FILE,
    OUTPUT_FILE,
    TEXT,
)
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, setting
from e2c.commandline.parsing import (
    DTYPES,
    ArgumentParser,
    count_lines,
    exit_interrupted,
    interrupt_on_sigterm,
    quiet_libraries,
    resume_command,
)
from e2c.core.errors import UserError
from e2c.core.models import resolve_model
from e2c.core.run_folder import check_lock
from e2c.data.bands import (
    format_histogram,
)
from e2c.eval.run import parse_gpus
from e2c.generation import ALIASES, BACKENDS, pick_backend, run_generator
from e2c.rl.passrate.config import (
    DEFAULT_INPUT,
    DEFAULT_MODEL,
    FilterConfig,
    PassRateFiles,
    default_output,
)
from e2c.rl.passrate.filter import check_paths, filter_prompts
from e2c.rl.passrate.samples import check_resume

# ---------------------------------------------------------------------------------------------- CLI


def _backend_choices() -> tuple[str, ...]:

    return (*BACKENDS, *ALIASES)


def _dtypes() -> tuple[str, ...]:

    return tuple(DTYPES)


@dataclass(frozen=True)
class RunControl:
    """Where the filter's files are and how it runs, beside what it keeps (:class:`FilterConfig`); each
    field is its flag, declared here once."""

    input: str | None = field(
        default=None,
        metadata=setting(
            "RL parquet in verl's schema (default: data/processed/rl/e2c_rl_train.parquet)",
            flag="--input",
            value=EXISTING_FILE,
        ),
    )
    output: str | None = field(
        default=None,
        metadata=setting(
            "kept rows (.parquet); the report, plot and samples file go beside it as "
            "<name>.passrate.{json,png,jsonl} (default: <input name>.filtered.parquet beside the input)",
            flag="--output",
            value=OUTPUT_FILE,
        ),
    )
    backend: str = field(
        default="auto",
        metadata=setting(
            "auto, vllm or hf (transformers) (default: auto: vllm when installed, GPU or CPU, else hf)",
            flag="--backend",
            choices=_backend_choices,
        ),
    )
    gpus: str | None = field(
        default=None,
        metadata=setting(
            "GPU count or device ids 0,1,..; vLLM tensor parallel size (default: all visible)",
            flag="--gpus",
            value=TEXT,
        ),
    )
    dtype: str = field(
        default="auto",
        metadata=setting(
            "model dtype (default: auto: bf16 on GPUs and on CPUs with native bf16, else float32)",
            flag="--dtype",
            choices=_dtypes,
        ),
    )
    trust_remote_code: bool = field(
        default=False,
        metadata=setting("allow the model repo's own Python code to run", flag="--trust-remote-code"),
    )
    quiet: bool = field(default=False, metadata=setting("no progress lines", flag="--quiet"))


# Older spellings of a setting's value, kept as flags that set it (declared by hand: they are not settings).
OLD_SPELLINGS = ("--require-format",)


def build_parser() -> argparse.ArgumentParser:
    """The run's flags: what it keeps (:class:`FilterConfig`) and how it runs (:class:`RunControl`), each
    declared once in its dataclass; and ``--require-format``, an older spelling of ``--reward-shape gate``."""

    p = ArgumentParser(prog="python -m e2c.rl.passrate", description=__doc__.split("\n\n")[0])
    add_setting_flags(p, FilterConfig)
    p.add_argument(
        "--require-format",
        dest="reward_shape",
        action="store_const",
        const="gate",
        help="the same as --reward-shape gate (an older spelling; default: off)",
    )
    add_setting_flags(p, RunControl)
    return p


def run(args: argparse.Namespace, log: Callable[[str], None]) -> dict[str, Any]:
    """Check every input, then load the model and filter; returns the report."""

    quiet_libraries()
    backend = pick_backend(args.backend)
    cfg = FilterConfig.from_flags(args, backend)
    output = Path(args.output) if args.output else default_output(args.input)
    files = check_paths(args.input, output)
    check_resume(files.samples, cfg.sample_settings())
    check_lock(files.lock, str(files.samples), "--output")
    gpus = None
    if args.gpus is not None:
        gpus = parse_gpus(args.gpus)
    # The model after the data: a bad input is named before minutes of model loading.
    res = resolve_model(args.model, cfg.subfolder, fmt=FORMATS[cfg.format])
    checks_done()
    gen, cfg.extra = run_generator(
        backend,
        res,
        FORMATS[cfg.format],
        log,
        f"k={cfg.k}, band {cfg.band}, output {output}",
        gpus=gpus,
        batch_size=cfg.batch_size * cfg.k,  # hf: every row of a call decodes at once
        dtype=args.dtype,
        trust_remote_code=args.trust_remote_code,
        seed=cfg.seed,
    )
    return filter_prompts(gen, args.input, output, cfg, log)


def one_line(message: str) -> str:
    """An error message on one line (a library's message may hold newlines)."""
    return " ".join(str(message).split())


def main(argv: Sequence[str] | None = None) -> int:

    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    # None in the parser, so that a missing default is named when it is checked, not while parsing
    args.model = args.model or DEFAULT_MODEL
    args.input = str(args.input or DEFAULT_INPUT)
    interrupt_on_sigterm()
    log = (lambda s: None) if args.quiet else (lambda s: print(s, file=sys.stderr, flush=True))
    try:
        report = run(args, log)
    except UserError as e:  # a library's message may span lines: the guard shows one, so all of it on one
        raise UserError(one_line(str(e))) from None
    except KeyboardInterrupt as e:
        output = Path(args.output) if args.output else default_output(args.input)
        samples = PassRateFiles.of(output).samples
        n = max(0, count_lines(samples) - 1)  # less the settings line
        exit_interrupted(
            e, f"{n} prompts' samples saved in {samples}", resume_command(["-m", "e2c.rl.passrate"], argv)
        )
    print(
        f"kept {report['kept']} of {report['prompts']} prompts ({report['band']['describe']}); "
        f"correct per prompt: {format_histogram([b['prompts'] for b in report['histogram']])}"
    )
    files = PassRateFiles.of(report["output"])
    print(f"output: {files.output}  report: {files.report}  plot: {files.plot}")
    print(
        json.dumps(
            {
                "output": str(files.output),
                "report": str(files.report),
                "prompts": report["prompts"],
                "kept": report["kept"],
                "histogram": [b["prompts"] for b in report["histogram"]],
            }
        )
    )
    return 0


if __name__ == "__main__":
    run_main(main)
