"""How the initial rows of newly added chain tags decide whether a short SFT teaches the model to emit them.

    python bench/tag_init.py [--steps 8] [--batch 8] [--lr 2e-4] [--inits spelling mean]

Loads the embedded SmolLM2-135M-Instruct as converted (tags already added), re-initialises the four tag
rows with each rule, and trains the whole model on E2C synthetic chains (AdamW, bf16 autocast, the loss on
the assistant turn only) for a few steps. Before and after, it reports the tags' mean log-probability and
median rank at their places in 8 held-out chains. ``spelling`` is the toolkit's rule
(:func:`e2c.core.models.tag_init_rows`); ``mean`` is the mean of all rows (the previous rule). This is a plain
torch loop, not verl's trainer: it isolates the initialisation. Ends with one JSON line.
"""

from __future__ import annotations

import json
import time

import torch

from e2c.chain import E2C, tag_token_ids
from e2c.commandline.argtypes import Number, whole
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.core.models import load_model_and_tokenizer, tag_init_rows
from e2c.data.synthetic.generate import generate, sft_row

# AdamW's step size: above 1 the embedded model's weights are noise after one step, which measures nothing.
LR = Number(float, low=0.0, high=1.0, low_open=True)


def chains(tok, n: int, seed: int) -> list[tuple[list[int], int]]:
    """``(ids, prompt length)`` of ``n`` short synthetic E2C chats, rendered with the chat template."""
    samples, _ = generate(n * 4, seed=seed, trace_frac=0.0, workers=1)
    out = []
    for s in samples:
        if s.variant != "solve" or s.level > 2:
            continue
        msgs = [dict(m) for m in sft_row(s)["messages"]]
        full = tok(tok.apply_chat_template(msgs, tokenize=False), add_special_tokens=False)["input_ids"]
        prompt = tok.apply_chat_template(msgs[:-1], tokenize=False, add_generation_prompt=True)
        if len(full) <= 512:
            out.append((full, len(tok(prompt, add_special_tokens=False)["input_ids"])))
        if len(out) == n:
            break
    return out


def tag_stats(model, held, tags: set[int]) -> dict[str, float]:
    """Mean log-prob and median rank of the tag tokens at their places in ``held``."""
    model.eval()
    lps, ranks = [], []
    with torch.no_grad():
        for ids, _ in held:
            logits = model(torch.tensor([ids])).logits[0].float()
            logp = logits.log_softmax(-1)
            for pos, t in enumerate(ids):
                if t in tags and pos > 0:
                    lps.append(float(logp[pos - 1, t]))
                    ranks.append(int((logits[pos - 1] > logits[pos - 1, t]).sum()))
    model.train()
    return {"logprob": sum(lps) / len(lps), "median_rank": sorted(ranks)[len(ranks) // 2]}


def run(init: str, steps: int, batch: int, lr: float, seed: int) -> dict:
    torch.manual_seed(seed)
    model, tok, _ = load_model_and_tokenizer("embedded", dtype="float32")
    ids = tag_token_ids(tok, E2C)
    tags = sorted(ids.values())
    n_used = min(tags)
    emb = model.get_input_embeddings().weight
    with torch.no_grad():
        if init == "mean":
            emb[tags] = emb[:n_used].mean(0, keepdim=True).expand(len(tags), -1)
        else:
            pieces = [tok.encode(t, add_special_tokens=False, split_special_tokens=True) for t in ids]
            emb[tags] = tag_init_rows(emb, pieces, n_used)
    data = chains(tok, steps * batch + 8, seed)
    held, train = data[-8:], data[:-8]
    res = {"init": init, "before": tag_stats(model, held, set(tags))}
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    t0 = time.perf_counter()
    for step in range(steps):
        rows = train[step * batch : (step + 1) * batch]
        width = max(len(r) for r, _ in rows)
        x = torch.full((len(rows), width), tok.pad_token_id)
        y = torch.full((len(rows), width), -100)
        for i, (r, p) in enumerate(rows):
            x[i, : len(r)] = torch.tensor(r)
            y[i, p : len(r)] = torch.tensor(r[p:])
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=y).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        print(f"{init}: step {step + 1}/{steps} loss {float(loss.detach()):.3f}", flush=True)
    res["after"] = tag_stats(model, held, set(tags))
    res["seconds"] = round(time.perf_counter() - t0, 1)
    return res


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="bench/tag_init.py", description=__doc__.splitlines()[0])
    # steps x batch chains are generated up front and a batch is one padded forward pass: the caps keep a
    # slip of the keyboard from asking for millions of chains or a batch no memory holds.
    ap.add_argument("--steps", type=whole(1, 10_000), default=8, help="training steps per arm (default: 8)")
    ap.add_argument("--batch", type=whole(1, 256), default=8, help="chains per step (default: 8)")
    ap.add_argument("--lr", type=LR, default=2e-4, help="AdamW learning rate (default: 2e-4)")
    ap.add_argument("--seed", type=whole(0), default=0, help="seed (default: 0)")
    ap.add_argument(
        "--inits",
        nargs="+",
        default=["spelling", "mean"],
        choices=["spelling", "mean"],
        help="initialisations to compare (default: spelling mean)",
    )
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    checks_done()
    results = [run(i, args.steps, args.batch, args.lr, args.seed) for i in args.inits]
    print(
        f"{'init':>9} | {'log-prob before':>15} | {'rank before':>11} | {'log-prob after':>14} | {'rank after':>10}"
    )
    for r in results:
        b, a = r["before"], r["after"]
        print(
            f"{r['init']:>9} | {b['logprob']:>15.2f} | {b['median_rank']:>11} | {a['logprob']:>14.2f} | "
            f"{a['median_rank']:>10}"
        )
    print(json.dumps({"steps": args.steps, "batch": args.batch, "lr": args.lr, "results": results}))
    return 0


if __name__ == "__main__":
    run_main(main)
