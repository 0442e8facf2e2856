"""The generator interface: completion semantics shared by all backends, the transformers backend on the
tiny model, the vLLM output mapping, the scripted backend, and two-phase / full-chain E2C generation."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from e2c.chain import E2C, PLAIN, THINK
from e2c.chain.budget import PhaseBudget
from e2c.core.errors import UserError
from e2c.generation import generate_chains, make_generator, pick_backend
from e2c.generation.base import Sampling, derive_seed, finish, split_stops
from e2c.generation.scripted import ScriptedGenerator, ScriptTokenizer
from e2c.generation.vllm import completion_from_vllm

# ----------------------------------------------------------------------------------- completion rules


@pytest.fixture
def stok() -> ScriptTokenizer:
    return ScriptTokenizer()


def ids_of(tok: ScriptTokenizer, text: str) -> list[int]:
    return tok.encode(text)


def test_script_tokenizer_round_trips_and_keeps_tags_whole(stok: ScriptTokenizer) -> None:
    text = "plan: add 2 and 3.</EXPLORATION><EXECUTION> 2+3 = \\boxed{5}</EXECUTION>"
    assert stok.decode(stok.encode(text)) == text
    assert stok.tokenize("a</EXPLORATION>b") == ["a", "</EXPLORATION>", "b"]
    assert stok.tokenize("add 2 and 3.") == ["add", " ", "2", " ", "and", " ", "3", "."]


def test_split_stops_uses_ids_for_special_tags(stok: ScriptTokenizer) -> None:
    spec = split_stops(stok, ["</EXPLORATION>", "Answer:", "", "Answer:"], [stok.eos_token_id])
    assert spec.token_ids == {stok.encode("</EXPLORATION>")[0]: "</EXPLORATION>"}
    assert spec.strings == ["Answer:"]
    assert spec.eos_ids == {stok.eos_token_id}


def test_split_stops_on_a_real_tokenizer(tiny_tok) -> None:
    spec = split_stops(tiny_tok, ["</EXPLORATION>", "EXECUTION PHASE:"], [tiny_tok.eos_token_id])
    assert list(spec.token_ids.values()) == ["</EXPLORATION>"]
    assert spec.strings == ["EXECUTION PHASE:"]


@pytest.mark.parametrize(
    ("generated", "stop", "max_tokens", "text", "n_tokens", "finish_reason", "stop_reason"),
    [
        # EOS: kept in the ids, dropped from the text, no stop reason (vLLM's convention).
        ("a plan<|eos|> more", [], 50, "a plan", 4, "stop", None),
        # A tag matched by id: the id is kept, the tag text is not, the reason is the tag.
        ("a plan</EXPLORATION> more", ["</EXPLORATION>"], 50, "a plan", 4, "stop", "</EXPLORATION>"),
        # A text stop spanning tokens: cut before it; ids run up to the token completing it.
        ("x = 1 Answer: 5", ["Answer:"], 50, "x = 1 ", 8, "stop", "Answer:"),
        # The earliest of several stops wins, whatever their order in the list.
        ("one two three", ["three", "two"], 50, "one ", 3, "stop", "two"),
        # Budget reached first: length, text of the first max_tokens ids.
        ("a b c d e", ["</EXPLORATION>"], 4, "a b ", 4, "length", None),
        # A stop right at the budget still counts as a stop (vLLM checks stops before length).
        ("a b<|eos|>", [], 4, "a b", 4, "stop", None),
    ],
)
def test_finish_rules(stok, generated, stop, max_tokens, text, n_tokens, finish_reason, stop_reason) -> None:
    spec = split_stops(stok, stop, [stok.eos_token_id])
    c = finish(ids_of(stok, generated), stok.decode, spec, max_tokens)
    assert (c.text, c.num_tokens, c.finish_reason, c.stop_reason) == (
        text,
        n_tokens,
        finish_reason,
        stop_reason,
    )


def test_finish_ignores_padding_after_the_end(stok: ScriptTokenizer) -> None:
    spec = split_stops(stok, ["Answer:"], [stok.eos_token_id])
    ids = stok.encode("x Answer:") + [stok.pad_token_id] * 3
    c = finish(ids, stok.decode, spec, 20, {stok.pad_token_id})
    assert (c.text, c.token_ids, c.stop_reason) == ("x ", stok.encode("x Answer:"), "Answer:")


def test_derive_seed_is_stable_and_distinct() -> None:
    assert derive_seed(0, "gsm8k", 3) == derive_seed(0, "gsm8k", 3)
    assert len({derive_seed(0, "gsm8k", i) for i in range(100)}) == 100
    assert derive_seed(None, 1) is None
    assert 0 <= derive_seed(7, "x") < 2**31  # type: ignore[operator]


# ----------------------------------------------------------------------------------- vLLM mapping


def vout(ids: list[int]) -> SimpleNamespace:
    # vLLM's own text and stop_reason are ignored on purpose (see completion_from_vllm); make them wrong.
    return SimpleNamespace(text="<vllm text>", token_ids=ids, finish_reason="stop", stop_reason=99)


def test_vllm_outputs_map_to_the_same_completions(stok: ScriptTokenizer) -> None:
    stops = split_stops(stok, ["</EXPLORATION>", "Answer:"], [stok.eos_token_id])
    dec = stok.decode
    for ids in (
        stok.encode("plan</EXPLORATION>"),
        stok.encode("x Answer: y"),
        [*stok.encode("done"), stok.eos_token_id],
        stok.encode("abcabc"),
    ):
        assert completion_from_vllm(vout(ids), stops, dec, 4) == finish(ids, dec, stops, 4)
    c = completion_from_vllm(vout(stok.encode("plan</EXPLORATION>")), stops, dec, 64)
    assert (c.text, c.finish_reason, c.stop_reason) == ("plan", "stop", "</EXPLORATION>")


def test_backend_choice_errors_are_one_line() -> None:
    assert pick_backend("auto") in ("hf", "vllm")
    assert pick_backend("transformers") == "hf"
    with pytest.raises(UserError, match="unknown backend 'tensorrt'; valid: auto, vllm, hf"):
        pick_backend("tensorrt")
    try:
        import vllm  # noqa: F401
    except ImportError:
        with pytest.raises(UserError, match=r"setup_env\.sh --vllm"):
            pick_backend("vllm")


# ----------------------------------------------------------------------------------- transformers


@pytest.fixture(scope="module")
def hf_gen(tiny_path: str):
    gen, _ = make_generator("hf", tiny_path, batch_size=4)
    return gen


def test_hf_length_and_counts(hf_gen) -> None:
    before = hf_gen.usage.snapshot()
    out = hf_gen.generate(["Hello there", "What is 2+3?"], Sampling(n=3, max_tokens=7, temperature=0.0))
    assert [len(r) for r in out] == [3, 3]
    for row in out:
        for c in row:
            assert c.num_tokens == 7 and c.finish_reason == "length" and c.stop_reason is None
    after = hf_gen.usage.snapshot()
    assert after["generated_tokens"] - before["generated_tokens"] == 42
    assert after["sequences"] - before["sequences"] == 6 and after["calls"] - before["calls"] == 1


def test_hf_batched_equals_one_at_a_time(hf_gen) -> None:
    prompts = ["Hello there", "What is 2+3? Let me think", "x", "A much longer prompt about plans and steps"]
    batched = hf_gen.generate(prompts, Sampling(n=1, max_tokens=10, temperature=0.0))
    single = [hf_gen.generate([p], Sampling(n=1, max_tokens=10, temperature=0.0))[0] for p in prompts]
    assert [r[0].token_ids for r in batched] == [r[0].token_ids for r in single]


def test_hf_greedy_equals_transformers_generate(hf_gen) -> None:
    # Our decode loop (finished rows leave the batch) against model.generate, prompt by prompt.
    prompts = ["What is 2+3? Let me think", "x", "A much longer prompt about plans and steps"]
    ours = hf_gen.generate(prompts, Sampling(n=2, max_tokens=12, temperature=0.0))
    tok, model = hf_gen.tokenizer, hf_gen.model
    for p, row in zip(prompts, ours, strict=True):
        enc = tok(p, return_tensors="pt", add_special_tokens=False)
        ref = model.generate(
            **enc,
            max_new_tokens=12,
            do_sample=False,
            eos_token_id=tok.eos_token_id,
            pad_token_id=tok.pad_token_id,
        )[0, enc["input_ids"].shape[1] :].tolist()
        if tok.eos_token_id in ref:
            ref = ref[: ref.index(tok.eos_token_id) + 1]
        assert [c.token_ids for c in row] == [ref, ref]


def nucleus_reference(probs: list[float], top_p: float) -> set[int]:
    """Plain loop: take tokens by falling probability until their mass reaches top_p."""
    kept, mass = set(), 0.0
    for i in sorted(range(len(probs)), key=lambda i: -probs[i]):
        if mass >= top_p:
            break
        kept.add(i)
        mass += probs[i]
    return kept


def test_nucleus_sampling_keeps_the_reference_set() -> None:
    import torch

    from e2c.generation.hf import sample_next

    torch.manual_seed(0)
    for _ in range(20):
        logits = torch.randn(1, 12) * 2
        probs = torch.softmax(logits, -1)[0].tolist()
        for top_p in (0.3, 0.6, 0.9, 1.0):
            seen = {int(sample_next(logits, 1.0, top_p)) for _ in range(200)}
            assert seen <= nucleus_reference(probs, top_p)
    assert sample_next(torch.tensor([[0.1, 3.0, 0.2]]), 0.0, 1.0).tolist() == [1]


def test_hf_shared_prompt_encoding_changes_nothing(hf_gen) -> None:
    # n > 1 encodes each prompt once and repeats its cache; greedy samples must equal the n = 1 output.
    prompts = ["What is 2+3? Let me think", "x", "A much longer prompt about plans and steps"]
    many = hf_gen.generate(prompts, Sampling(n=3, max_tokens=10, temperature=0.0))
    for p, row in zip(prompts, many, strict=True):
        [[one]] = hf_gen.generate([p], Sampling(n=1, max_tokens=10, temperature=0.0))
        assert [c.token_ids for c in row] == [one.token_ids] * 3


def test_hf_stop_string_is_stripped_and_only_generated_text_matches(hf_gen) -> None:
    [[ref]] = hf_gen.generate(["Hello there"], Sampling(max_tokens=20, temperature=0.0))
    assert len(ref.text) > 12
    stop = ref.text[6:12]
    [[c]] = hf_gen.generate(["Hello there"], Sampling(max_tokens=20, temperature=0.0, stop=[stop]))
    assert c.finish_reason == "stop" and c.stop_reason == stop
    assert c.text == ref.text[: ref.text.find(stop)]
    assert c.token_ids == ref.token_ids[: c.num_tokens] and c.num_tokens < 20
    # Text that only appears across the prompt/output boundary never stops generation (transformers'
    # stop_strings would stop there; vLLM matches generated text only).
    across = "there" + ref.text[:2]
    assert across not in ref.text
    [[c2]] = hf_gen.generate(["Hello there"], Sampling(max_tokens=20, temperature=0.0, stop=[across]))
    assert (c2.num_tokens, c2.finish_reason, c2.text) == (20, "length", ref.text)


def test_hf_seeded_sampling_repeats(hf_gen) -> None:
    a = hf_gen.generate(["Q?", "R?"], Sampling(n=2, max_tokens=8, temperature=1.0, seed=3))
    b = hf_gen.generate(["Q?", "R?"], Sampling(n=2, max_tokens=8, temperature=1.0, seed=3))
    c = hf_gen.generate(["Q?", "R?"], Sampling(n=2, max_tokens=8, temperature=1.0, seed=4))
    ids = lambda out: [x.token_ids for row in out for x in row]  # noqa: E731
    assert ids(a) == ids(b) and ids(a) != ids(c)


def test_hf_two_phase_budgets(hf_gen) -> None:
    [chains] = generate_chains(hf_gen, ["What is 2+3?"], E2C, 3, budget=PhaseBudget(2048, 6, 9), seed=1)
    for ch in chains:
        assert ch.explore_tokens <= 6 and ch.execute_tokens <= 9
        p = E2C.parse(ch.response)
        assert p.explore_closed and p.has_execution  # closed for the model when it did not close itself
        if ch.explore_stop == "budget":
            assert ch.explore_tokens == 6 and ch.forced_close


# ----------------------------------------------------------------------------------- scripted + chains


CHAIN = "Plan: add.</EXPLORATION><EXECUTION> 2 + 3 = \\boxed{5}</EXECUTION>"


def test_scripted_records_calls_and_derives_continuations() -> None:
    gen = ScriptedGenerator.from_responses({"2+3": [CHAIN]})
    prompt = E2C.render_prompt(gen.tokenizer, "What is 2+3?")
    [[c]] = gen.generate([prompt], Sampling(max_tokens=100, stop=["</EXECUTION>"]))
    assert c.text == CHAIN[: -len("</EXECUTION>")] and c.stop_reason == "</EXECUTION>"
    # A prompt holding part of the chain continues it; one that diverged gets the execution.
    [[d]] = gen.generate([prompt + "Plan: add.</EXPLORATION><EXECUTION>"], Sampling(max_tokens=100))
    assert d.text == " 2 + 3 = \\boxed{5}</EXECUTION>"
    [[e]] = gen.generate([prompt + "Other plan</EXPLORATION><EXECUTION>"], Sampling(max_tokens=100))
    assert e.text == d.text
    assert gen.calls[0]["stop"] == ["</EXECUTION>"] and len(gen.calls) == 3


def test_two_phase_model_closes_its_exploration() -> None:
    gen = ScriptedGenerator.from_responses({"2+3": [CHAIN]})
    [[ch]] = generate_chains(gen, ["What is 2+3?"], E2C, budget=PhaseBudget(2048, 50, 50), seed=0)
    tok = gen.tokenizer
    assert ch.response == CHAIN
    assert ch.explore_stop == "tag" and not ch.forced_close and ch.finish_reason == "stop"
    # Phase 1 counts "Plan: add." (5 tokens) plus the sampled tag; phase 2 the execution plus its closing tag.
    assert ch.explore_tokens == len(tok.encode("Plan: add.</EXPLORATION>")) == 6
    assert ch.execute_tokens == len(tok.encode(" 2 + 3 = \\boxed{5}</EXECUTION>"))
    assert gen.usage.generated_tokens == ch.total_tokens
    # The execution prompt is the chain prompt plus the exploration, closed, and the execution opened.
    assert gen.calls[1]["prompts"][0].endswith("<EXPLORATION>Plan: add.</EXPLORATION><EXECUTION>")
    assert gen.calls[0]["stop"] == ["</EXPLORATION>"] and gen.calls[1]["stop"] == ["</EXECUTION>"]
    assert gen.calls[0]["max_tokens"] == 50 and gen.calls[0]["seed"] != gen.calls[1]["seed"]


def test_two_phase_budget_forces_the_close() -> None:
    gen = ScriptedGenerator.from_responses(
        {"2+3": ["Plan:First I add the numbers carefully.</EXPLORATION><EXECUTION> 5"]}
    )
    [[ch]] = generate_chains(gen, ["What is 2+3?"], E2C, budget=PhaseBudget(2048, 3, 10), opener="Plan:")
    assert ch.explore_stop == "budget" and ch.forced_close and ch.explore_tokens == 3
    assert ch.response == "Plan:First I</EXPLORATION><EXECUTION> 5"  # First, " ", I
    assert ch.execute_tokens == 3 and ch.finish_reason == "stop"  # " ", "5", EOS
    assert E2C.parse(ch.response).status == "truncated_execution"


def test_two_phase_eos_while_exploring_and_execution_budget() -> None:
    gen = ScriptedGenerator(
        lambda p, j: "short plan" if p.endswith("<EXPLORATION>") else "one two three four"
    )
    [[ch]] = generate_chains(gen, ["Q"], E2C, budget=PhaseBudget(2048, 10, 4))
    assert ch.explore_stop == "eos" and ch.forced_close and ch.explore_tokens == 4  # short, " ", plan, EOS
    assert ch.finish_reason == "length" and ch.execute_tokens == 4
    assert ch.response == "short plan</EXPLORATION><EXECUTION>one two "  # one, " ", two, " "


def test_full_mode_splits_tokens_at_the_tag() -> None:
    gen = ScriptedGenerator.from_responses({"2+3": [CHAIN, "no tags at all"]})
    [chains] = generate_chains(gen, ["What is 2+3?"], E2C, 2, budget=PhaseBudget(100))
    ok, bad = chains
    assert ok.response == CHAIN and ok.mode == "full" and ok.explore_stop == "tag"
    assert (ok.explore_tokens, ok.execute_tokens) == (6, len(gen.tokenizer.encode(CHAIN)) - 6)
    assert bad.explore_stop == "none" and bad.execute_tokens == 0 and bad.explore_tokens == 8  # 7 + EOS
    assert len(gen.calls) == 1 and gen.calls[0]["n"] == 2 and gen.calls[0]["max_tokens"] == 100


@pytest.mark.parametrize("fmt", [PLAIN, THINK])
def test_text_formats_in_both_modes(fmt) -> None:
    resp = f"make a plan{fmt.explore_boundary} do it, \\boxed{{4}}"
    gen = ScriptedGenerator.from_responses({"Q": [resp]}, fmt=fmt)
    [[two]] = generate_chains(gen, ["Q"], fmt, budget=PhaseBudget(2048, 20, 20))
    [[one]] = generate_chains(gen, ["Q"], fmt, budget=PhaseBudget(40))
    for ch in (two, one):
        p = fmt.parse(ch.response)
        assert p.has_execution and "do it" in p.execution and ch.explore_stop == "tag"
    assert two.response == one.response == resp
    assert two.explore_tokens == one.explore_tokens


def test_budget_errors() -> None:
    gen = ScriptedGenerator(lambda p, j: "x")
    with pytest.raises(
        ValueError, match="explore_budget 10 leaves nothing of max_tokens 10 for the execution"
    ):
        PhaseBudget(10, explore=10)
    with pytest.raises(ValueError, match="execute_budget must be >= 1, got 0"):
        PhaseBudget(2048, 10, 0)
    with pytest.raises(ValueError, match="execute_budget needs explore_budget"):
        PhaseBudget(2048, execute=5)
    with pytest.raises(ValueError, match="max_tokens must be >= 1"):
        gen.generate(["Q"], Sampling(max_tokens=0))


class ForceToken:
    """A causal LM whose ``at``-th generated token is forced to ``token`` (every row): stands in for a
    model that ends its turn with an EOS its generation config lists but its tokenizer does not."""

    def __init__(self, model, token: int, at: int) -> None:
        self.model, self.token, self.at, self.calls = model, token, at, 0

    def __getattr__(self, name: str):
        return getattr(self.model, name)

    def eval(self) -> ForceToken:
        self.model.eval()
        return self

    def __call__(self, **kw):
        out = self.model(**kw)
        if self.calls == self.at:  # call 0 (the prompt) gives token 0's logits, call k token k's
            out.logits[:, -1, self.token] = out.logits.max() + 1e4
        self.calls += 1
        return out


def test_hf_stops_on_generation_config_eos(tiny_path: str) -> None:
    """A Qwen3 generation config lists <|endoftext|> as an EOS besides the tokenizer's <|im_end|>; vLLM and
    the RL rollouts stop on it, so must the hf backend (review fix C)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from e2c.generation.hf import HFGenerator

    tok = AutoTokenizer.from_pretrained(tiny_path)
    model = AutoModelForCausalLM.from_pretrained(tiny_path)
    end = tok.convert_tokens_to_ids("<|endoftext|>")
    assert end != tok.eos_token_id
    model.generation_config.eos_token_id = [tok.eos_token_id, end]
    free = HFGenerator(model, tok).generate(["What is 2+3?"], Sampling(n=2, max_tokens=12, temperature=0.0))[
        0
    ]
    assert all(end not in c.token_ids for c in free)  # the forced token is the only way it appears
    out = HFGenerator(ForceToken(model, end, at=3), tok).generate(
        ["What is 2+3?"], Sampling(n=2, max_tokens=12, temperature=0.0)
    )[0]
    for c, ref in zip(out, free, strict=True):
        assert c.finish_reason == "stop" and c.stop_reason is None
        assert c.token_ids == [*ref.token_ids[:3], end] and c.num_tokens == 4  # kept in the ids, like vLLM
        assert c.text == tok.decode(ref.token_ids[:3], skip_special_tokens=False)
        assert "<|endoftext|>" not in c.text
