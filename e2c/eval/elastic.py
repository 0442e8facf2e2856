"""Elastic Reasoning's evaluation command, accepted as its README types it, run by :mod:`e2c.eval.run`.

    ./scripts/eval/eval_model.sh --model M --datasets aime math amc minerva olympiad_bench \\
        --output-dir D --n 16 --tp 1 --e1-mode True --e1-thinking-length 1024 --e1-solution-length 1024

``--datasets`` -> ``--dataset``; ``--n`` -> ``--sample``; ``--e1-mode True`` -> two-phase generation (thinking
length -> ``--explore-budget``, solution length -> ``--execute-budget``, their sum -> ``--max-tokens``);
``--e1-mode False`` -> one call of ``--max-length`` tokens; ``--format think`` unless another is given. Every
other flag goes to ``e2c.eval.run`` as given; the translated command is printed first.
More: docs/generation-and-evaluation.md, "Elastic Reasoning's evaluation command".
"""

from __future__ import annotations

import argparse
import shlex
import sys
from dataclasses import dataclass, field
from typing import NoReturn

from e2c.chain import FORMATS
from e2c.commandline.argtypes import (
    OUTPUT_DIR,
    TEXT,
    ValueType,
    at_least,
    probability,
    whole,
)
from e2c.commandline.entry import run_main
from e2c.commandline.flags import add_setting_flags, from_flags, setting
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.data.registry import resolve_names
from e2c.eval import run

TRUE = ("true", "1", "yes")
FALSE = ("false", "0", "no")


class Switch(ValueType):
    """Elastic's ``--e1-mode``: True or False as its README types them (any case; 1/0, yes/no too)."""

    name = "True or False"

    def parse(self, text: str) -> bool:
        mode = str(text).strip().lower()
        if mode not in TRUE + FALSE:
            raise UserError(f"must be True or False, got {str(text)!r}")
        return mode in TRUE


class RaisingParser(ArgumentParser):
    """The toolkit's parser, raising its one line as :class:`UserError` instead of exiting: :func:`translate`
    is a library call too (the guard of :func:`main` prints the line and exits 2)."""

    def error(self, message: str) -> NoReturn:
        raise UserError(f"{message} (see {self.prog} --help)")


@dataclass(frozen=True)
class ElasticSettings:
    """Elastic Reasoning's ``eval_model.sh`` flags: each field is one flag."""

    # Any text here: e2c.eval.run checks the model (a folder's config, weights and tokenizer) before any work.
    model: str = field(
        default="",
        metadata=setting("model folder or HF id (required)", flag="--model", value=TEXT, required=True),
    )
    datasets: tuple[str, ...] = field(
        default=("aime",),
        metadata=setting("benchmarks, space-separated (default: aime)", flag="--datasets", value=TEXT),
    )
    output_dir: str | None = field(
        default=None,
        metadata=setting(
            "run folder (default: e2c.eval.run's, under evaluation/e2c-eval)",
            flag="--output-dir",
            value=OUTPUT_DIR,
        ),
    )
    n: int = field(
        default=1,
        metadata=setting(
            "samples per problem (default: 1; Elastic's tables: 16)", flag="--n", value=whole(1)
        ),
    )
    tp: int = field(
        default=1,
        metadata=setting(
            "tensor-parallel GPUs per vLLM engine; the visible GPUs make GPUs/tp data-parallel workers (default: 1)",
            flag="--tp",
            value=whole(1),
        ),
    )
    e1_mode: bool = field(
        default=False,
        metadata=setting(
            "True: budgeted thinking then solution; False: one call (default: False)",
            flag="--e1-mode",
            value=Switch(),
        ),
    )
    e1_thinking_length: int = field(
        default=1024,
        metadata=setting(
            "thinking budget in E1 mode (default: 1024)", flag="--e1-thinking-length", value=whole(1)
        ),
    )
    e1_solution_length: int = field(
        default=1024,
        metadata=setting(
            "solution budget in E1 mode (default: 1024)", flag="--e1-solution-length", value=whole(1)
        ),
    )
    max_length: int = field(
        default=32768,
        metadata=setting("new tokens without E1 mode (default: 32768)", flag="--max-length", value=whole(1)),
    )
    temperature: float = field(
        default=0.6,
        metadata=setting(
            "sampling temperature (default: 0.6, Elastic's)", flag="--temperature", value=at_least(0)
        ),
    )
    top_p: float = field(
        default=0.95,
        metadata=setting(
            "nucleus sampling mass (default: 0.95)", flag="--top-p", value=probability(open_zero=True)
        ),
    )
    format: str = field(
        default="think",
        metadata=setting(
            "chain format (default: think, Elastic's <think> models)", flag="--format", choices=tuple(FORMATS)
        ),
    )


def build_parser() -> argparse.ArgumentParser:
    p = RaisingParser(prog="scripts/eval/eval_model.sh", description=__doc__.splitlines()[0])
    add_setting_flags(p, ElasticSettings)
    return p


def translate(argv: list[str]) -> list[str]:
    """Elastic Reasoning's flags -> the arguments of ``python -m e2c.eval.run`` (raises UserError)."""
    ns, rest = build_parser().parse_known_args(argv)
    args = from_flags(ns, ElasticSettings)
    try:
        names = resolve_names(",".join(args.datasets))
    except UserError as e:
        raise UserError(f"--datasets: {e}") from None
    out = ["--model", args.model, "--dataset", ",".join(names), "--sample", str(args.n)]
    out += ["--temperature", f"{args.temperature:g}", "--top-p", f"{args.top_p:g}", "--format", args.format]
    if args.tp > 1:
        out += ["--tp", str(args.tp)]
    if args.e1_mode:
        total = args.e1_thinking_length + args.e1_solution_length
        out += ["--explore-budget", str(args.e1_thinking_length)]
        out += ["--execute-budget", str(args.e1_solution_length), "--max-tokens", str(total)]
    else:
        out += ["--max-tokens", str(args.max_length)]
    if args.output_dir:
        out += ["--output-dir", str(args.output_dir)]
    return out + rest


def main(argv: list[str] | None = None) -> int:
    """Translate, show the translated command, run it: :mod:`e2c.eval.run` checks the rest of the inputs
    (and calls :func:`e2c.commandline.entry.checks_done`) before any work."""

    args = translate(list(sys.argv[1:] if argv is None else argv))
    print(f"[eval_model] python -m e2c.eval.run {shlex.join(args)}", flush=True)
    return run.main(args)


if __name__ == "__main__":
    run_main(main)
