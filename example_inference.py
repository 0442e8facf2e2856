#!/usr/bin/env python3
"""E2C inference demo: one problem, an exploration then an execution, each phase shown with its tokens.

    python example_inference.py                     # the released 8B (GPU + hub), else the embedded SmolLM2-135M
    python example_inference.py --model tiny        # the random tiny test model (seconds)
    python example_inference.py --model_path TingheOliver/Explore-Execute-Chain-Qwen --subfolder 8B

With a released or user checkpoint it is the paper's single call: 2048 new tokens, temperature 0.7, no
exploration cut. --explore-budget N makes it two budgeted calls (explore up to N tokens, stopping at the
closing exploration tag, then execute with the rest of --max-tokens). The embedded and tiny models get 384
tokens, a 128-token exploration cut and the release's usual opening, which keep a CPU run short.
--backend picks vllm (GPU) or hf (transformers); auto takes vllm when a GPU and vllm are present. The embedded model was never trained on
E2C: expect a closed-for-it exploration and a weak answer; it shows the pipeline, not the method.
"""

from __future__ import annotations

import argparse

from e2c.commandline.argtypes import ANY_TEXT, TEXT
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.demo import add_generation_flags, load, prepare, solve_and_show

DEFAULT_PROBLEM = (
    "Janet's ducks lay 16 eggs per day. She eats three for breakfast every morning and bakes muffins for "
    "her friends every day with four. She sells the remainder at the farmers' market daily for $2 per "
    "fresh duck egg. How much in dollars does she make every day at the farmers' market?"
)
DEFAULT_ANSWER = "18"


def build_parser() -> argparse.ArgumentParser:
    p = ArgumentParser(description="Run E2C inference on one problem.")
    p.add_argument(
        "--problem", type=TEXT, default=DEFAULT_PROBLEM, help="problem text (default: a GSM8K problem)"
    )
    p.add_argument(
        "--answer",
        type=ANY_TEXT,
        default=None,
        help="reference answer to grade against; '' to skip (default: 18 for the default problem, "
        "none for a --problem of yours)",
    )
    add_generation_flags(p)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # The default answer belongs to the default problem only: another problem is not graded against it.
    answer = (
        args.answer
        if args.answer is not None
        else (DEFAULT_ANSWER if args.problem == DEFAULT_PROBLEM else None)
    )
    demo = prepare(args)
    checks_done()
    gen = load(demo)
    solve_and_show(gen, demo, args.problem, answer or None)
    return 0


if __name__ == "__main__":
    run_main(main)
