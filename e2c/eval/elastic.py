"""Elastic Reasoning's evaluation command, accepted as its README types it, run by :mod:`e2c.eval.run`.

    ./scripts/eval/eval_model.sh --model M --datasets aime math amc minerva olympiad_bench \\
        --output-dir D --n 16 --tp 1 --e1-mode True --e1-thinking-length 1024 --e1-solution-length 1024
    ./scripts/eval/eval_model.sh --model M --datasets aime --e1-mode False --max-length 32768

Mapping onto the toolkit: ``--datasets`` -> ``--dataset`` (aime is AIME 2024, math is MATH500, amc is AMC23);
``--n`` -> ``--sample``; ``--tp`` -> ``--tp`` (GPUs per data-parallel worker); ``--e1-mode True`` -> the two-phase
budgeted generation (thinking budget -> ``--explore-budget``, solution budget -> ``--execute-budget``, their
sum -> ``--max-tokens``), ``--e1-mode False`` -> one call of ``--max-length`` tokens. Elastic's models think
in ``<think>`` tags: ``--format think`` unless another is given. Every other flag goes to
``e2c.eval.run`` as given (``--data-dir``, ``--limit``, ``--backend``, ...). The translated command is
printed first.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from e2c.cli import ArgumentParser
from e2c.errors import UserError, fail

TRUE = ("true", "1", "yes")
FALSE = ("false", "0", "no")


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(prog="scripts/eval/eval_model.sh", description=__doc__.splitlines()[0])
    a = p.add_argument
    a("--model", required=True, help="model folder or HF id (required)")
    a("--datasets", nargs="+", default=["aime"], help="benchmarks, space-separated (default: aime)")
    a("--output-dir", default=None, help="run folder (default: e2c.eval.run's, under evaluation/e2c-eval)")
    a("--n", type=int, default=1, help="samples per problem (default: 1; Elastic's tables: 16)")
    a(
        "--tp",
        type=int,
        default=1,
        help="tensor-parallel GPUs per vLLM engine; the visible GPUs make GPUs/tp "
        "data-parallel workers (default: 1)",
    )
    a(
        "--e1-mode",
        default="False",
        help="True: budgeted thinking then solution; False: one call (default: False)",
    )
    a("--e1-thinking-length", type=int, default=1024, help="thinking budget in E1 mode (default: 1024)")
    a("--e1-solution-length", type=int, default=1024, help="solution budget in E1 mode (default: 1024)")
    a("--max-length", type=int, default=32768, help="new tokens without E1 mode (default: 32768)")
    a("--temperature", type=float, default=0.6, help="sampling temperature (default: 0.6, Elastic's)")
    a("--top-p", type=float, default=0.95, help="nucleus sampling mass (default: 0.95)")
    a("--format", default="think", help="chain format (default: think, Elastic's <think> models)")
    return p


def translate(argv: list[str]) -> list[str]:
    """Elastic Reasoning's flags -> the arguments of ``python -m e2c.eval.run`` (raises UserError)."""
    from e2c.data.registry import resolve_names

    args, rest = build_parser().parse_known_args(argv)
    mode = args.e1_mode.strip().lower()
    if mode not in TRUE + FALSE:
        raise UserError(f"--e1-mode must be True or False, got {args.e1_mode!r}")
    for flag, value in (
        ("--n", args.n),
        ("--tp", args.tp),
        ("--e1-thinking-length", args.e1_thinking_length),
        ("--e1-solution-length", args.e1_solution_length),
        ("--max-length", args.max_length),
    ):
        if value < 1:
            raise UserError(f"{flag} must be at least 1, got {value}")
    try:
        names = resolve_names(",".join(args.datasets))
    except UserError as e:
        raise UserError(f"--datasets: {e}") from None
    out = ["--model", args.model, "--dataset", ",".join(names), "--sample", str(args.n)]
    out += ["--temperature", f"{args.temperature:g}", "--top-p", f"{args.top_p:g}", "--format", args.format]
    if args.tp > 1:
        out += ["--tp", str(args.tp)]
    if mode in TRUE:
        total = args.e1_thinking_length + args.e1_solution_length
        out += ["--explore-budget", str(args.e1_thinking_length)]
        out += ["--execute-budget", str(args.e1_solution_length), "--max-tokens", str(total)]
    else:
        out += ["--max-tokens", str(args.max_length)]
    if args.output_dir:
        out += ["--output-dir", args.output_dir]
    return out + rest


def main(argv: list[str] | None = None) -> int:
    from e2c.eval import run

    try:
        args = translate(list(sys.argv[1:] if argv is None else argv))
    except UserError as e:
        fail(str(e))
    print(f"[eval_model] python -m e2c.eval.run {shlex.join(args)}", flush=True)
    return run.main(args)


if __name__ == "__main__":
    sys.exit(main())
