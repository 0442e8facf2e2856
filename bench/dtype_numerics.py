"""How evaluation numbers move with the dtype (and the backend): the same greedy evaluation run per arm.

    python bench/dtype_numerics.py --model outputs/quickstart/sft/final --data-dir outputs/quickstart/data/eval \
        [--dataset synthetic,gsm8k] [--arms hf:float32,hf:bfloat16,vllm:bfloat16] [--out outputs/dtype_numerics]

Each arm is one real ``python -m e2c.eval.run`` (greedy, one sample, the same budget and data) into
``OUT/<backend>-<dtype>``; a finished arm is reused, a killed one resumes. Then, per dataset and against the
first arm: each arm's accuracy, how many responses are character-identical, how many problems flip
(correct in one arm only, both ways), and the mean generated tokens. Greedy decoding makes every difference
a numerical one: bf16 rounds activations to 8 bits of mantissa, so near-tied logits can pick another token,
and the chain diverges from there.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import (
    EXISTING_DIR,
    MODEL,
    OUTPUT_DIR,
    TEXT,
    ValueType,
    whole,
)
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import DTYPES, ArgumentParser
from e2c.core.errors import UserError
from e2c.data.registry import find_local, get_spec, resolve_names, search_dirs

DEFAULT_ARMS = "hf:float32,hf:bfloat16,vllm:bfloat16"
BACKENDS = ("hf", "vllm")
# New tokens per response: no model this toolkit runs has a context past 128K tokens.
MAX_NEW_TOKENS = 131_072


def parse_arms(text: str) -> list[tuple[str, str]]:
    """``"hf:float32,vllm"`` -> ``[("hf", "float32"), ("vllm", "auto")]``; one line naming a bad arm."""
    arms = []
    for item in filter(None, (a.strip() for a in text.split(","))):
        backend, _, dtype = item.partition(":")
        if backend not in BACKENDS:
            raise UserError(
                f"has an unknown backend {backend!r}; valid: {', '.join(BACKENDS)} (as BACKEND:DTYPE)"
            )
        if dtype and dtype not in DTYPES:
            raise UserError(f"has an unknown dtype {dtype!r} in {item!r}; valid: {', '.join(DTYPES)}")
        arms.append((backend, dtype or "auto"))
    if len(arms) < 2:
        raise UserError("needs at least two arms to compare, e.g. hf:float32,hf:bfloat16")
    if len(set(arms)) < len(arms):
        raise UserError(f"names an arm twice in {text!r}; each arm is one run folder")
    return arms


class Arms(ValueType):
    """``--arms``: two or more ``BACKEND:DTYPE`` evaluations, compared against the first."""

    name = "two or more BACKEND:DTYPE arms"

    def parse(self, text: str) -> list[tuple[str, str]]:
        return parse_arms(str(text))


class Datasets(ValueType):
    """``--dataset``: benchmark names, groups or aliases, comma-separated (as ``python -m e2c.eval.run``)."""

    name = "comma-separated dataset names"

    def parse(self, text: str) -> str:
        TEXT.parse(text)
        resolve_names(str(text))
        return str(text)


def check_datasets(spec: str, data_dir: Path) -> list[str]:
    """The benchmark names of ``--dataset``, each with a local file in ``--data-dir`` (the arms evaluate
    with ``--no-hub``): refused here, before the first arm runs, instead of inside it."""
    names = resolve_names(spec)
    dirs = search_dirs(data_dir)
    for name in names:
        if find_local(get_spec(name), dirs) is None:
            raise UserError(
                f"--dataset {name}: no local file for it in --data-dir {data_dir} (the arms run with --no-hub)"
            )
    return names


def run_arm(backend: str, dtype: str, args: Any, out: Path) -> float:
    """One greedy evaluation; returns its wall seconds (0 when an earlier finished run was reused)."""
    if (out / "results.json").exists():
        return 0.0
    cmd = [
        sys.executable,
        "-m",
        "e2c.eval.run",
        "--model",
        args.model,
        "--backend",
        backend,
        "--dtype",
        dtype,
    ]
    cmd += ["--dataset", args.dataset, "--data-dir", str(args.data_dir)]
    cmd += ["--temperature", "0", "--sample", "1"]
    cmd += ["--max-tokens", str(args.max_tokens), "--output-dir", str(out), "--no-hub", "--quiet"]
    cmd += ["--batch-size", str(args.batch_size)]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    print(f"[numerics] {backend}:{dtype} -> {out}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd)
    if proc.returncode != 0:
        raise SystemExit(
            f"error: the {backend}:{dtype} evaluation failed (exit {proc.returncode}); see above"
        )
    return time.perf_counter() - t0


def compare(base: dict[int, dict], other: dict[int, dict]) -> dict[str, Any]:
    """Sample 0 of every problem both runs hold: identical responses and correctness flips."""
    keys = sorted(set(base) & set(other))
    a = [base[k][0] for k in keys]
    b = [other[k][0] for k in keys]
    return {
        "problems": len(keys),
        "identical": sum(x["response"] == y["response"] for x, y in zip(a, b, strict=True)),
        "only_base_correct": sum(x["correct"] and not y["correct"] for x, y in zip(a, b, strict=True)),
        "only_this_correct": sum(y["correct"] and not x["correct"] for x, y in zip(a, b, strict=True)),
    }


def summary(run_dir: Path, dataset: str) -> dict[str, Any]:
    """Accuracy and mean generated tokens of one dataset, as the run's ``results.json`` reports them."""
    from e2c.eval.compare import run_summary

    e = run_summary(run_dir)[dataset]
    return {"accuracy": e["accuracy"], "mean_tokens": round(e["explore_tokens"] + e["execute_tokens"], 1)}


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="bench/dtype_numerics.py", description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--model", type=MODEL, default="embedded", help="model spec or folder (default: embedded)"
    )
    ap.add_argument(
        "--data-dir", type=EXISTING_DIR, required=True, help="folder with the datasets' files (required)"
    )
    ap.add_argument(
        "--dataset",
        type=Datasets(),
        default="synthetic,gsm8k",
        help="datasets (default: synthetic,gsm8k)",
    )
    ap.add_argument("--limit", type=whole(1), default=None, help="first N problems of each (default: all)")
    ap.add_argument(
        "--max-tokens",
        type=whole(1, MAX_NEW_TOKENS),
        default=320,
        help="new tokens per response (default: 320)",
    )
    ap.add_argument(
        "--batch-size", type=whole(1, 4096), default=16, help="hf rows decoded at once (default: 16)"
    )
    ap.add_argument(
        "--arms", type=Arms(), default=DEFAULT_ARMS, help=f"BACKEND:DTYPE list (default: {DEFAULT_ARMS})"
    )
    ap.add_argument(
        "--out",
        type=OUTPUT_DIR,
        default="outputs/dtype_numerics",
        help="run folders (default: outputs/dtype_numerics)",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    arms = args.arms
    root = Path(args.out)
    names = check_datasets(args.dataset, args.data_dir)
    checks_done()
    from e2c.eval.runner import read_predictions

    seconds = {f"{b}:{d}": run_arm(b, d, args, root / f"{b}-{d}") for b, d in arms}
    preds = {
        f"{b}:{d}": {n: read_predictions(root / f"{b}-{d}" / "predictions" / f"{n}.jsonl") for n in names}
        for b, d in arms
    }
    base_key = next(iter(preds))
    report: dict[str, Any] = {
        "model": args.model,
        "max_tokens": args.max_tokens,
        "base": base_key,
        "arms": {},
    }
    print(f"model {args.model}; greedy, <= {args.max_tokens} tokens; flips and identical against {base_key}")
    print(
        f"{'dataset':<12}{'arm':<18}{'accuracy':>9}{'tokens':>8}{'identical':>11}{'flips -/+':>11}{'eval s':>8}"
    )
    for key, per in preds.items():
        report["arms"][key] = {"seconds": round(seconds[key], 1), "datasets": {}}
        for name in names:
            row = {**summary(root / key.replace(":", "-"), name), **compare(preds[base_key][name], per[name])}
            report["arms"][key]["datasets"][name] = row
            flips = f"{row['only_base_correct']}/{row['only_this_correct']}"
            ident = f"{row['identical']}/{row['problems']}"
            secs = f"{seconds[key]:.0f}" if seconds[key] else "reused"
            print(
                f"{name:<12}{key:<18}{row['accuracy']:>9.3f}{row['mean_tokens']:>8}{ident:>11}{flips:>11}{secs:>8}"
            )
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    run_main(main)
