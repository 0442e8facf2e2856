"""What sampling settings cost on vLLM for CPU: the same prompts and token count, decoded greedily, sampled,
sampled with a seed per request, with log-probs, and with top-p.

    python bench/vllm_sampling.py [--model embedded] [--prompts 64] [--tokens 150] [--dtype bfloat16]

Why it exists: the quickstart's TTS ran at ~170 tok/s where greedy evaluation ran at ~560 on the same engine.
vLLM's CPU sampler sorts the whole vocabulary of every row at every step for top-p, and draws a seeded
request's noise row by row with its own generator; both are per-token costs that a 135M model's forward pass
does not hide. Every run ignores EOS, so each setting decodes exactly ``prompts x tokens`` tokens. Prints one
line per setting, then one JSON line with tok/s per setting. Needs vLLM (``scripts/setup_env.sh --vllm``).
"""

from __future__ import annotations

import importlib.util
import json
import os
import time

from e2c.commandline.argtypes import MODEL, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import DTYPES, ArgumentParser
from e2c.core.errors import UserError

NO_VLLM = "vLLM is not installed: bash scripts/setup_env.sh --vllm"
# New tokens per response: no model this toolkit runs has a context past 128K tokens.
MAX_NEW_TOKENS = 131_072


def build_parser() -> ArgumentParser:
    p = ArgumentParser(prog="bench/vllm_sampling.py", description=__doc__.splitlines()[0])
    p.add_argument(
        "--model",
        type=MODEL,
        default="embedded",
        help="embedded, tiny, a folder or an HF id (default: embedded)",
    )
    p.add_argument(
        "--prompts", type=whole(1, 100_000), default=64, help="prompts decoded together (default: 64)"
    )
    p.add_argument(
        "--tokens", type=whole(1, MAX_NEW_TOKENS), default=150, help="new tokens per prompt (default: 150)"
    )
    p.add_argument(
        "--dtype",
        choices=DTYPES,
        default="auto",
        help="auto (bf16 where the CPU has it), bfloat16, float32, float16 (default: auto)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if importlib.util.find_spec("vllm") is None:  # before the model is built, not after
        raise UserError(NO_VLLM)
    checks_done()
    from e2c.core.models import resolve_model
    from e2c.generation.vllm import cpu_engine_env, engine_kwargs

    for k, v in cpu_engine_env().items():
        os.environ.setdefault(k, v)
    try:
        from vllm import LLM, SamplingParams
    except ImportError as e:  # installed but broken (a CUDA build beside the CPU torch)
        raise UserError(f"vLLM does not import ({e}); {NO_VLLM}") from None
    # the engine settings of the toolkit's CPU backend (eager, bf16 where native, whole prefills)
    llm = LLM(model=resolve_model(args.model).path, seed=0, **engine_kwargs(True, args.dtype, None))
    prompts = [f"Question {i}: what is {i} times {i + 3}? Think step by step." for i in range(args.prompts)]
    base = {"max_tokens": args.tokens, "ignore_eos": True}
    settings = {
        "greedy": SamplingParams(temperature=0.0, **base),
        "sampled": SamplingParams(temperature=1.0, **base),
        "sampled, seed per request": [
            SamplingParams(temperature=1.0, seed=i, **base) for i in range(len(prompts))
        ],
        "sampled, log-probs": SamplingParams(temperature=1.0, logprobs=0, **base),
        "sampled, top-p 0.95": SamplingParams(temperature=1.0, top_p=0.95, **base),
        "sampled, top-p 0.95, seed per request": [
            SamplingParams(temperature=1.0, top_p=0.95, seed=i, **base) for i in range(len(prompts))
        ],
    }
    llm.generate(prompts[:2], SamplingParams(temperature=1.0, max_tokens=4), use_tqdm=False)  # warm-up
    rates = {}
    for name, sp in settings.items():
        t0 = time.perf_counter()
        outs = llm.generate(prompts, sp, use_tqdm=False)
        dt = time.perf_counter() - t0
        n = sum(len(c.token_ids) for o in outs for c in o.outputs)
        rates[name] = round(n / dt, 1)
        print(f"{name:<40} {n:>7} tokens {dt:>7.1f} s {n / dt:>7.0f} tok/s", flush=True)
    print(json.dumps({"model": args.model, "prompts": args.prompts, "tokens": args.tokens, "tok_s": rates}))
    return 0


if __name__ == "__main__":
    run_main(main)
