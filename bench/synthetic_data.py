"""Synthetic-data throughput and the EF-SFT trained-token share.

    python bench/synthetic_data.py [--n 5000] [--workers 2] [--tokenizer embedded]

Generates ``n`` verified problems (tracing every reference program in limited subprocesses), then builds
EF-SFT rows from the synthetic SFT split and counts trained tokens with the given tokenizer. Prints a
table, then one JSON line.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from e2c.commandline.argtypes import MODEL, Number, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.data import efsft
from e2c.data.synthetic.generate import generate, rows_by_split


@dataclass(frozen=True, repr=False)
class Share(Number):
    """A share in [0, 1): EF-SFT's full-chain share, where 1 would leave no exploration-only rows (and
    :func:`e2c.data.efsft.build` refuses it)."""

    kind: type = float
    low: float | None = 0.0
    high: float | None = 1.0
    label: str = "a share >= 0 and < 1"

    def _in_range(self, v: float) -> bool:
        return 0.0 <= v < 1.0


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="bench/synthetic_data.py", description=__doc__.split("\n\n")[0])
    # Every sample, with its trace, is held in memory until the EF-SFT rows are built.
    ap.add_argument("--n", type=whole(1, 500_000), default=5000, help="problems to generate (default 5000)")
    ap.add_argument(
        "--workers", type=whole(1, 1024), default=2, help="tracer subprocesses in parallel (default 2)"
    )
    ap.add_argument("--seed", type=whole(0), default=0, help="seed (default 0)")
    ap.add_argument("--reg-frac", type=Share(), default=0.05, help="EF-SFT full-chain share (default 0.05)")
    ap.add_argument(
        "--tokenizer", type=MODEL, default="embedded", help="tokenizer for token counts (default embedded)"
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    checks_done()

    t0 = time.perf_counter()
    samples, report = generate(args.n, seed=args.seed, workers=args.workers)
    gen_s = time.perf_counter() - t0
    rows = rows_by_split(samples)

    from transformers import AutoTokenizer

    from e2c.core.models import resolve_model

    tok = AutoTokenizer.from_pretrained(resolve_model(args.tokenizer).path)
    t1 = time.perf_counter()
    _, stats = efsft.build(rows["sft"], efsft.tokenizer_counter(tok), reg_frac=args.reg_frac, seed=args.seed)
    ef_s = time.perf_counter() - t1

    print(f"{'problems':24s} {args.n}")
    print(f"{'samples (with traces)':24s} {len(samples)}")
    print(f"{'splits':24s} {dict(report.made)}")
    print(f"{'dropped':24s} {dict(report.dropped)}")
    print(f"{'seconds':24s} {gen_s:.2f}")
    print(f"{'samples/s':24s} {len(samples) / gen_s:.0f}")
    print(stats.line())
    print(
        json.dumps(
            {
                "problems": args.n,
                "samples": len(samples),
                "workers": args.workers,
                "seconds": round(gen_s, 2),
                "samples_per_s": round(len(samples) / gen_s, 1),
                "dropped": dict(report.dropped),
                "ef_sft_share": round(stats.share, 4),
                "ef_sft_rows": stats.exploration_rows + stats.full_rows,
                "ef_sft_seconds": round(ef_s, 2),
                "tokenizer": args.tokenizer,
            }
        )
    )
    return 0


if __name__ == "__main__":
    run_main(main)
