"""What the two inference demos share: their generation flags, one solve-and-show step, the model loading.

``example_inference.py`` solves one problem; ``example_interactive.py`` loops over built-in or typed
problems. Both print the EXPLORATION PHASE and EXECUTION PHASE sections, the extracted answer (graded when
a reference is known) and per-phase token counts.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from e2c.argtypes import ANY_TEXT, ModelRef, at_least, probability, whole
from e2c.budget import PhaseBudget
from e2c.chain import FORMATS, ChainFormat, get_format
from e2c.cli import quiet_libraries
from e2c.errors import UserError
from e2c.generation import BACKENDS, generate_chains, make_generator, pick_backend
from e2c.generation.base import check_fits, context_length
from e2c.models import RELEASED_REPO, ResolvedModel, default_subfolder, resolve_model
from e2c.rewards import grade

CLOSED_FOR_MODEL = {
    "budget": " (exploration closed for the model at its budget)",
    "eos": " (the model ended its turn while exploring; exploration closed for it)",
}
RULE = "=" * 70


# Small local models (never trained on E2C, slow on a CPU): a short budget, an exploration cut and the
# release's usual opening keep the demo quick and show both phases. Any other model gets the paper's call.
SMALL_MODELS = ("embedded", "tiny")
SMALL_DEFAULTS = {
    "max_tokens": 384,
    "explore_budget": 128,
    "opener": "I need to make a step-by-step plan.\n1.",
}
PAPER_DEFAULTS = {"max_tokens": 2048, "explore_budget": 0, "opener": ""}


def add_generation_flags(p: argparse.ArgumentParser) -> None:
    """The demo flags: the paper's (``--model --subfolder --max-tokens --temperature``; its underscore
    spellings such as ``--model_path`` are accepted, :data:`e2c.cli.FLAG_ALIASES`) plus ours. Defaults that
    depend on the model are filled by :func:`fill_defaults`."""
    a = p.add_argument
    a(
        "--model",
        type=ModelRef(extra=("auto",)),
        default="auto",
        help="model: auto, embedded, tiny, a folder or an HF id (default: auto: the released 8B where a GPU "
        "and the hub are there, else the embedded SmolLM2-135M)",
    )
    a(
        "--subfolder",
        type=ANY_TEXT,
        default=None,
        help="subfolder of the model repo/folder, e.g. 8B or 4B (default: 8B for the released checkpoint, "
        "else none)",
    )
    a(
        "--backend",
        default="auto",
        choices=[*BACKENDS, "transformers"],
        help="generation backend (default: auto)",
    )
    a(
        "--max-tokens",
        type=whole(1),
        default=None,
        help=f"new tokens, both phases (default: {PAPER_DEFAULTS['max_tokens']}, as the paper; embedded/tiny: "
        f"{SMALL_DEFAULTS['max_tokens']})",
    )
    a(
        "--explore-budget",
        type=whole(0),
        default=None,
        help="tokens for the exploration, then the execution gets the rest; 0 = one call for the whole chain "
        f"(default: 0, as the paper; embedded/tiny: {SMALL_DEFAULTS['explore_budget']})",
    )
    a("--temperature", type=at_least(0), default=0.7, help="sampling temperature; 0 = greedy (default: 0.7)")
    a("--top-p", type=probability(open_zero=True), default=0.95, help="nucleus sampling mass (default: 0.95)")
    a("--seed", type=whole(0), default=0, help="random seed (default: 0)")
    a(
        "--opener",
        type=ANY_TEXT,
        default=None,
        help="text that starts the exploration for the model; '' for none (default: none, as the paper; "
        "embedded/tiny: the release's usual opening)",
    )
    a("--format", default="e2c", choices=list(FORMATS), help="chain format (default: e2c)")
    a("--trust-remote-code", action="store_true", help="allow the model repo's own Python code to run")
    a(
        "--verbose",
        action="store_true",
        help="show the libraries' own log lines (vLLM, transformers) too (default: off; E2C_VERBOSE=1 does "
        "the same)",
    )


def auto_model(gpus: int, hub: bool) -> tuple[str, str | None]:
    """``--model auto``: the released checkpoint where a GPU and the hub are there, else the embedded model,
    with the one line that says why (None when the released model is used)."""
    if gpus and hub:
        return RELEASED_REPO, None
    why = "no GPU" if not gpus else "no hub"
    return "embedded", f"{why}: the embedded SmolLM2-135M runs instead of the released 8B (--model picks one)"


def fill_defaults(args: argparse.Namespace) -> None:
    """Resolve ``--model auto`` and the defaults that depend on the model (:data:`PAPER_DEFAULTS` for a
    released or user checkpoint, :data:`SMALL_DEFAULTS` for embedded/tiny); flags given stay."""
    if args.model == "auto":
        from e2c.devices import gpu_count
        from e2c.models import hub_reachable

        gpus = gpu_count()
        args.model, note = auto_model(gpus, bool(gpus) and hub_reachable())
        if note:
            print(note, flush=True)
    defaults = SMALL_DEFAULTS if args.model in SMALL_MODELS else PAPER_DEFAULTS
    for key, value in defaults.items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.subfolder = default_subfolder(args.model, args.subfolder)


def check_flags(args: argparse.Namespace) -> None:
    """The generation flags together, before the model is loaded (each flag's range is its type's); the
    checked budget travels on as ``args.budget``."""
    if args.max_tokens <= args.explore_budget:
        raise UserError(
            f"--max-tokens ({args.max_tokens}) must exceed --explore-budget ({args.explore_budget}) >= 0"
        )
    # 0 is this flag's "off" (PhaseBudget's None); the check above is PhaseBudget's rule in this flag's words.
    args.budget = PhaseBudget(args.max_tokens, args.explore_budget or None)


def check_prompt(gen: Any, args: argparse.Namespace, problem: str) -> None:
    """Refuse a problem that with --max-tokens does not fit in the model's context (one line), before a
    generation that would crawl through positions the model never saw."""
    context = context_length(gen)
    if context is None:
        return
    prompt = get_format(args.format).render_prompt(gen.tokenizer, problem) + args.opener
    n = len(gen.tokenizer.encode(prompt, add_special_tokens=False))
    check_fits(n, args.max_tokens, context, "the problem with its prompt", "--max-tokens")


def prepare(args: argparse.Namespace) -> ResolvedModel:
    """Fill the model-dependent defaults, check the flags together and resolve the model (a local folder's
    config, weights and tokenizer checked): every refusal before :func:`e2c.entry.checks_done`."""
    fill_defaults(args)
    check_flags(args)
    pick_backend(args.backend)  # vllm asked for and not installed: one line now, not after the checks
    return resolve_model(args.model, args.subfolder, fmt=get_format(args.format))


def load(args: argparse.Namespace) -> Any:
    """Build the generator from the flags :func:`prepare` checked and filled (the model resolves again
    from its cache); a model that cannot be loaded is a :class:`UserError` line."""
    quiet_libraries(args.verbose)
    t0 = time.perf_counter()
    gen, res = make_generator(
        args.backend,
        args.model,
        args.subfolder,
        fmt=get_format(args.format),
        trust_remote_code=args.trust_remote_code,
        seed=args.seed,
    )
    print(f"model: {res.description}  [{res.path}]  on {gen.name}, loaded in {time.perf_counter() - t0:.1f}s")
    return gen


def solve_and_show(
    gen: Any,
    args: argparse.Namespace,
    problem: str,
    answer: str | None = None,
    kind: str = "math",
    options: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Generate one chain for ``problem``, print it with its answer and token counts; return a summary.

    Raises :class:`~e2c.errors.UserError` (nothing printed) when the problem does not fit in the context.
    """
    fmt: ChainFormat = get_format(args.format)
    check_prompt(gen, args, problem)
    print(f"{RULE}\nPROBLEM:\n{problem}\n{RULE}", flush=True)
    t0 = time.perf_counter()
    [[out]] = generate_chains(
        gen,
        [problem],
        fmt,
        1,
        budget=args.budget,
        temperature=args.temperature,
        top_p=args.top_p,
        seed=args.seed,
        opener=args.opener,
    )
    secs = time.perf_counter() - t0
    parsed = fmt.parse(out.response)
    print(fmt.render(parsed))
    print(RULE)
    # With no reference the grader still extracts the answer (its reason is then unparseable_gold).
    result = grade(out.response, answer, kind, options=options, fmt=fmt)  # type: ignore[arg-type]
    print(f"extracted answer : {result.extracted}")
    if answer:
        print(f"reference answer : {answer}  -> {'correct' if result.correct else result.reason}")
    else:
        print("reference answer : none given (not graded)")
    print(f"chain status     : {parsed.status}{CLOSED_FOR_MODEL.get(out.explore_stop, '')}")
    print(
        f"tokens           : exploration {out.explore_tokens}, execution {out.execute_tokens}, "
        f"total {out.total_tokens} in {secs:.1f}s ({out.total_tokens / max(secs, 1e-9):.1f} tok/s)",
        flush=True,
    )
    return {
        "extracted": result.extracted,
        "correct": result.correct if answer else None,
        "status": parsed.status,
        "explore_tokens": out.explore_tokens,
        "execute_tokens": out.execute_tokens,
    }
