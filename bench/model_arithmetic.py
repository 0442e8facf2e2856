"""What arithmetic a model does before any training: few-shot, greedy, one operation per prompt.

    python bench/model_arithmetic.py [--model embedded] [--per-kind 50] [--backend auto] [--seed 0]

Sizes the synthetic task mix of the quickstart: every step of a chain a small model is to learn in a few
hundred examples should be an operation it already mostly gets right. Each prompt is four solved examples
("3 + 4 = 7", ...) and one question; the answer is the first line of the greedy continuation. Operands are
drawn per kind (one-digit sums and products, two-digit sums, differences, products by tens, ...). Prints a
table, then one JSON line with the accuracy per kind.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from e2c.commandline.argtypes import MODEL, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import DTYPES, ArgumentParser
from e2c.generation import ALIASES, BACKENDS, make_generator, pick_backend
from e2c.generation.base import Sampling

SHOTS = "3 + 4 = 7\n12 - 5 = 7\n6 * 7 = 42\n25 + 18 = 43\n"

KINDS: dict[str, Callable[[random.Random], tuple[int, str, int]]] = {
    "one-digit + one-digit": lambda r: (r.randint(1, 9), "+", r.randint(1, 9)),
    "one-digit * one-digit": lambda r: (r.randint(2, 9), "*", r.randint(2, 9)),
    "one-digit * tens": lambda r: (r.randint(2, 9), "*", r.choice([10, 20, 30, 40, 50])),
    "two-digit + one-digit": lambda r: (r.randint(10, 99), "+", r.randint(1, 9)),
    "two-digit + two-digit": lambda r: (r.randint(10, 99), "+", r.randint(10, 99)),
    "two-digit * one-digit": lambda r: (r.randint(10, 30), "*", r.randint(2, 9)),
    "one-digit - one-digit": lambda r: (r.randint(5, 9), "-", r.randint(1, 4)),
    "two-digit - one-digit": lambda r: (r.randint(10, 99), "-", r.randint(1, 9)),
    "two-digit - two-digit": lambda r: (r.randint(50, 99), "-", r.randint(10, 49)),
    "three-digit + three-digit": lambda r: (r.randint(100, 400), "+", r.randint(100, 300)),
    "three-digit - three-digit": lambda r: (r.randint(100, 400), "-", r.randint(100, 300)),
}


def value(a: int, op: str, b: int) -> int:
    return {"+": a + b, "-": a - b, "*": a * b}[op]


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="bench/model_arithmetic.py", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--model", type=MODEL, default="embedded", help="tiny, embedded, or a model folder (default embedded)"
    )
    ap.add_argument(
        "--per-kind", type=whole(1, 100_000), default=50, help="questions per kind of operation (default 50)"
    )
    ap.add_argument(
        "--backend",
        choices=(*BACKENDS, *ALIASES),
        default="auto",
        help="generation backend: auto, vllm or hf (default auto)",
    )
    ap.add_argument(
        "--dtype",
        choices=DTYPES,
        default="auto",
        help="model dtype (default auto: bf16 where the CPU has it)",
    )
    ap.add_argument("--seed", type=whole(0), default=0, help="seed of the operands (default 0)")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    backend = pick_backend(a.backend)  # vllm asked for and not installed: one line now, not after loading
    checks_done()
    gen, _ = make_generator(backend, a.model, dtype=a.dtype, seed=a.seed)
    rng = random.Random(a.seed)
    questions = [(kind, *KINDS[kind](rng)) for kind in KINDS for _ in range(a.per_kind)]
    prompts = [f"{SHOTS}{x} {op} {y} =" for _, x, op, y in questions]
    outs = gen.generate(prompts, Sampling(max_tokens=8, temperature=0.0, seed=a.seed))
    right: dict[str, int] = dict.fromkeys(KINDS, 0)
    for (kind, x, op, y), row in zip(questions, outs, strict=True):
        said = row[0].text.strip().split("\n")[0].strip()
        right[kind] += said == str(value(x, op, y))
    acc = {k: right[k] / a.per_kind for k in KINDS}
    print(f"{'operation':<28} accuracy ({a.per_kind} each, {gen.name}, {a.model})")
    for k, v in acc.items():
        print(f"{k:<28} {100 * v:5.1f}%")
    print(json.dumps({"model": a.model, "backend": gen.name, "per_kind": a.per_kind, "accuracy": acc}))
    return 0


if __name__ == "__main__":
    run_main(main)
