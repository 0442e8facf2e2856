"""What the two inference demos share: their generation flags, one solve-and-show step, the model loading.

``example_inference.py`` solves one problem; ``example_interactive.py`` loops over built-in or typed
problems. Both print the EXPLORATION PHASE and EXECUTION PHASE sections, the extracted answer (graded when
a reference is known) and per-phase token counts.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field, replace
from typing import Any

from e2c.chain import FORMATS, ChainFormat, get_format
from e2c.chain.budget import PhaseBudget
from e2c.commandline.argtypes import ANY_TEXT, ModelRef, at_least, probability, whole
from e2c.commandline.flags import add_setting_flags, from_flags, setting
from e2c.commandline.parsing import quiet_libraries
from e2c.core.errors import UserError
from e2c.core.models import RELEASED_REPO, ResolvedModel, default_subfolder, hub_reachable, resolve_model
from e2c.generation import BACKENDS, generate_chains, make_generator, pick_backend
from e2c.generation.base import check_fits, context_length
from e2c.launch.devices import gpu_count
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


@dataclass(frozen=True)
class GenerationSettings:
    """The demo flags: the paper's (``--model --subfolder --max-tokens --temperature``; its underscore
    spellings such as ``--model_path`` are accepted, :data:`e2c.commandline.parsing.FLAG_ALIASES`) plus ours. The defaults
    that depend on the model are None here and filled by :func:`fill_defaults`."""

    model: str = field(
        default="auto",
        metadata=setting(
            "model: auto, embedded, tiny, a folder or an HF id (default: auto: the released 8B where a GPU "
            "and the hub are there, else the embedded SmolLM2-135M)",
            flag="--model",
            value=ModelRef(extra=("auto",)),
        ),
    )
    subfolder: str | None = field(
        default=None,
        metadata=setting(
            "subfolder of the model repo/folder, e.g. 8B or 4B (default: 8B for the released checkpoint, "
            "else none)",
            flag="--subfolder",
            value=ANY_TEXT,
        ),
    )
    backend: str = field(
        default="auto",
        metadata=setting(
            "generation backend (default: auto)", flag="--backend", choices=[*BACKENDS, "transformers"]
        ),
    )
    max_tokens: int | None = field(
        default=None,
        metadata=setting(
            f"new tokens, both phases (default: {PAPER_DEFAULTS['max_tokens']}, as the paper; embedded/tiny: "
            f"{SMALL_DEFAULTS['max_tokens']})",
            flag="--max-tokens",
            value=whole(1),
        ),
    )
    explore_budget: int | None = field(
        default=None,
        metadata=setting(
            "tokens for the exploration, then the execution gets the rest; 0 = one call for the whole chain "
            f"(default: 0, as the paper; embedded/tiny: {SMALL_DEFAULTS['explore_budget']})",
            flag="--explore-budget",
            value=whole(0),
        ),
    )
    temperature: float = field(
        default=0.7,
        metadata=setting(
            "sampling temperature; 0 = greedy (default: 0.7)", flag="--temperature", value=at_least(0)
        ),
    )
    top_p: float = field(
        default=0.95,
        metadata=setting(
            "nucleus sampling mass (default: 0.95)", flag="--top-p", value=probability(open_zero=True)
        ),
    )
    seed: int = field(default=0, metadata=setting("random seed (default: 0)", flag="--seed", value=whole(0)))
    opener: str | None = field(
        default=None,
        metadata=setting(
            "text that starts the exploration for the model; '' for none (default: none, as the paper; "
            "embedded/tiny: the release's usual opening)",
            flag="--opener",
            value=ANY_TEXT,
        ),
    )
    format: str = field(
        default="e2c", metadata=setting("chain format (default: e2c)", flag="--format", choices=list(FORMATS))
    )
    trust_remote_code: bool = field(
        default=False,
        metadata=setting(
            "allow the model repo's own Python code to run (default: off)", flag="--trust-remote-code"
        ),
    )
    verbose: bool = field(
        default=False,
        metadata=setting(
            "show the libraries' own log lines (vLLM, transformers) too (default: off; E2C_VERBOSE=1 does "
            "the same)",
            flag="--verbose",
        ),
    )


def add_generation_flags(p: argparse.ArgumentParser) -> None:
    """:class:`GenerationSettings`' flags on a demo's parser."""
    add_setting_flags(p, GenerationSettings)


@dataclass(frozen=True)
class Demo:
    """What a demo runs with, checked before the model loads (:func:`prepare`): its settings with the
    model-dependent defaults filled, the token budget and the resolved model."""

    settings: GenerationSettings
    budget: PhaseBudget
    model: ResolvedModel


def auto_model(gpus: int, hub: bool) -> tuple[str, str | None]:
    """``--model auto``: the released checkpoint where a GPU and the hub are there, else the embedded model,
    with the one line that says why (None when the released model is used)."""
    if gpus and hub:
        return RELEASED_REPO, None
    why = "no GPU" if not gpus else "no hub"
    return "embedded", f"{why}: the embedded SmolLM2-135M runs instead of the released 8B (--model picks one)"


def fill_defaults(s: GenerationSettings) -> GenerationSettings:
    """Resolve ``--model auto`` and the defaults that depend on the model (:data:`PAPER_DEFAULTS` for a
    released or user checkpoint, :data:`SMALL_DEFAULTS` for embedded/tiny); flags given stay."""
    model = s.model
    if model == "auto":
        gpus = gpu_count()
        model, note = auto_model(gpus, bool(gpus) and hub_reachable())
        if note:
            print(note, flush=True)
    defaults = SMALL_DEFAULTS if model in SMALL_MODELS else PAPER_DEFAULTS
    unset = {k: v for k, v in defaults.items() if getattr(s, k) is None}
    return replace(s, model=model, subfolder=default_subfolder(model, s.subfolder), **unset)


def check_budget(s: GenerationSettings) -> PhaseBudget:
    """The generation flags together, before the model is loaded (each flag's range is its type's): the
    token budget they give."""
    max_tokens, explore = int(s.max_tokens or 0), int(s.explore_budget or 0)
    if max_tokens <= explore:
        raise UserError(f"--max-tokens ({max_tokens}) must exceed --explore-budget ({explore}) >= 0")
    # 0 is this flag's "off" (PhaseBudget's None); the check above is PhaseBudget's rule in this flag's words.
    return PhaseBudget(max_tokens, explore or None)


def check_prompt(gen: Any, demo: Demo, problem: str) -> None:
    """Refuse a problem that with --max-tokens does not fit in the model's context (one line), before a
    generation that would crawl through positions the model never saw."""
    context = context_length(gen)
    if context is None:
        return
    s = demo.settings
    prompt = get_format(s.format).render_prompt(gen.tokenizer, problem) + (s.opener or "")
    n = len(gen.tokenizer.encode(prompt, add_special_tokens=False))
    check_fits(n, demo.budget.total, context, "the problem with its prompt", "--max-tokens")


def prepare(args: argparse.Namespace) -> Demo:
    """The demo's settings from its parsed flags, the model-dependent defaults filled, the flags checked
    together and the model resolved (a local folder's config, weights and tokenizer checked): every refusal
    before :func:`e2c.commandline.entry.checks_done`."""
    s = fill_defaults(from_flags(args, GenerationSettings))
    budget = check_budget(s)
    pick_backend(s.backend)  # vllm asked for and not installed: one line now, not after the checks
    return Demo(s, budget, resolve_model(s.model, s.subfolder, fmt=get_format(s.format)))


def load(demo: Demo) -> Any:
    """Build the generator from the settings :func:`prepare` checked and filled (the model resolves again
    from its cache); a model that cannot be loaded is a :class:`UserError` line."""
    s = demo.settings
    quiet_libraries(s.verbose)
    t0 = time.perf_counter()
    gen, res = make_generator(
        s.backend,
        s.model,
        s.subfolder,
        fmt=get_format(s.format),
        trust_remote_code=s.trust_remote_code,
        seed=s.seed,
    )
    print(f"model: {res.description}  [{res.path}]  on {gen.name}, loaded in {time.perf_counter() - t0:.1f}s")
    return gen


def solve_and_show(
    gen: Any,
    demo: Demo,
    problem: str,
    answer: str | None = None,
    kind: str = "math",
    options: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Generate one chain for ``problem``, print it with its answer and token counts; return a summary.

    Raises :class:`~e2c.core.errors.UserError` (nothing printed) when the problem does not fit in the context.
    """
    s = demo.settings
    fmt: ChainFormat = get_format(s.format)
    check_prompt(gen, demo, problem)
    print(f"{RULE}\nPROBLEM:\n{problem}\n{RULE}", flush=True)
    t0 = time.perf_counter()
    [[out]] = generate_chains(
        gen,
        [problem],
        fmt,
        1,
        budget=demo.budget,
        temperature=s.temperature,
        top_p=s.top_p,
        seed=s.seed,
        opener=s.opener or "",
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
