"""Exact compatibility with the paper's release: the question suffix, the evaluation prompt
without prefill, the optional medical prompts, the release's raw data layout and evaluation columns, and
SFT that trains on exactly the text inference produces (Qwen3's real chat template included).

The release strings are typed out here on purpose (not imported), so a change to the library's
constants cannot silently change what these tests check.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from release_text import CHAIN, OLD_SUFFIX, SUFFIX

from e2c.chain import E2C, ChainFormat
from e2c.core.errors import UserError
from e2c.data import efsft, paper, registry
from e2c.data.io import write_parquet
from e2c.eval.runner import EvalConfig, run_eval
from e2c.generation.scripted import ScriptedGenerator

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

MED_SYSTEM = (
    "You are a medical expert. You will be given a medical question and several candidate answers. "
    "Please choose the best answer based on your medical knowledge. You must give your answer in the "
    "format: 'The correct answer is boxed{A,B,C or D}'."
)
MED_SUFFIX = "\nPlease reasoning step-by-step.Provide the final answer in the boxed{}."


# ------------------------------------------------------------------------------------- 1. the suffix
def test_default_suffix_is_the_releases() -> None:
    assert E2C.prompt_suffix == SUFFIX
    assert E2C.user_content("What is 2+3?") == "What is 2+3?" + SUFFIX


@pytest.mark.parametrize(
    "text",
    [
        "What is 2+3?" + SUFFIX,
        "What is 2+3?" + OLD_SUFFIX,
        "What is 2+3?" + SUFFIX + "\n",
        "What is 2+3?" + OLD_SUFFIX + "  \n",
        "What is 2+3? " + SUFFIX,
        "What is 2+3?\n" + OLD_SUFFIX + "\t",
    ],
)
def test_a_carried_suffix_is_never_appended_again(text: str) -> None:
    out = E2C.user_content(text)
    assert out.count("reasoning step-by-step") == 1 and out.startswith("What is 2+3?")


def test_custom_suffix_and_no_suffix() -> None:
    fmt = E2C.replace(prompt_suffix="Answer in \\boxed{}.", suffix_separator="\n")
    assert fmt.user_content("Q") == "Q\nAnswer in \\boxed{}."
    assert fmt.user_content("Q\nAnswer in \\boxed{}.  ") == "Q\nAnswer in \\boxed{}.  "
    assert E2C.replace(prompt_suffix="").user_content("Q") == "Q"


@pytest.mark.parametrize("carried", [SUFFIX, OLD_SUFFIX, " " + OLD_SUFFIX + "\n"])
def test_paper_data_gets_the_release_suffix_once(carried: str) -> None:
    """SFT, RL and EF-SFT rows built from data that already carries a suffix (either spelling) end with
    exactly one suffix, the release's."""
    sft, _ = paper.sft_rows([{"question": "What is 2+3?" + carried, "solution": CHAIN}])
    rl, _ = paper.rl_rows(
        [{"prompt": [{"role": "user", "content": "What is 2+3?" + carried}], "answer": "5"}]
    )
    ef = efsft.examples(
        [
            {
                "messages": [
                    {"role": "user", "content": "What is 2+3?" + carried},
                    {"role": "assistant", "content": CHAIN},
                ]
            }
        ]
    )
    assert sft[0]["messages"][0]["content"] == "What is 2+3?" + SUFFIX
    assert rl[0]["prompt"][-1]["content"] == "What is 2+3?" + SUFFIX
    assert ef[0].question == "What is 2+3?"
    ef_rows, _ = efsft.build([{"question": "What is 2+3?" + carried, "solution": CHAIN}], len, reg_frac=0.0)
    assert ef_rows[0]["messages"][0]["content"] == "What is 2+3?" + SUFFIX


# ----------------------------------------------------------------------------------- 2. the prefill
def _qwen3_tokenizer():
    """The tiny test vocabulary with Qwen3's real chat template (tests/fixtures/qwen3_chat_template.jinja)."""
    from e2c.core.models import build_tiny_tokenizer

    tok = build_tiny_tokenizer()
    tok.chat_template = (FIXTURES / "qwen3_chat_template.jinja").read_text()
    return tok


def _config(**kw) -> EvalConfig:
    base = dict(model="scripted", samples=2, max_tokens=100, chunk_size=2, backend="scripted")
    return EvalConfig(**{**base, **kw})


def test_release_eval_prompt_without_prefill(tiny_tok) -> None:
    from e2c.eval.runner import dataset_format

    q = "What is 2+3?"
    plain = dataset_format(_config(prefill=False), "gsm8k")
    assert plain.render_prompt(tiny_tok, q) == (
        f"<|im_start|>user\n{q}{SUFFIX}<|im_end|>\n<|im_start|>assistant\n"
    )
    assert dataset_format(_config(), "gsm8k").render_prompt(tiny_tok, q) == (
        f"<|im_start|>user\n{q}{SUFFIX}<|im_end|>\n<|im_start|>assistant\n<EXPLORATION>"
    )
    # Qwen3's own template: the generation prompt has no <think> block unless enable_thinking=False.
    qwen3 = _qwen3_tokenizer()
    assert (
        plain.render_prompt(qwen3, q) == f"<|im_start|>user\n{q}{SUFFIX}<|im_end|>\n<|im_start|>assistant\n"
    )
    ids = qwen3.encode(plain.render_prompt(qwen3, q), add_special_tokens=False)
    assert qwen3.decode(ids) == plain.render_prompt(qwen3, q)


def test_no_prefill_run_sends_the_bare_prompt_and_parses_the_models_tag(tmp_path: Path) -> None:
    gen = ScriptedGenerator.from_responses({"2+3": [CHAIN, CHAIN[len("<EXPLORATION>") :]]})
    rec = registry.Record("gsm8k-a", "What is 2+3?", "5", "math")
    res = run_eval(gen, {"gsm8k": [rec]}, _config(prefill=False), tmp_path)
    prompt = gen.calls[0]["prompts"][0]
    assert prompt.endswith("What is 2+3?" + SUFFIX + "\n<|assistant|>\n")
    lines = [json.loads(x) for x in (tmp_path / "predictions" / "gsm8k.jsonl").read_text().splitlines()]
    # The model wrote its own opening tag: a well-formed chain. Without it the chain is not well formed
    # (nothing was prefilled for it), though its boxed answer is still graded.
    assert [x["chain_status"] for x in lines] == ["ok", "missing_explore_close"]
    assert all(x["correct"] for x in lines)
    assert res["datasets"]["gsm8k"]["pass@1"] == 1.0
    saved = json.loads((tmp_path / "results.json").read_text())
    assert saved["config"]["prefill"] is False and saved["prompts"]["gsm8k"] == prompt
    assert json.loads((tmp_path / "config.json").read_text())["prefill"] is False
    with pytest.raises(UserError, match=r"another run \(prefill False -> True\)"):
        run_eval(gen, {"gsm8k": [rec]}, _config(), tmp_path)


def test_runs_recorded_before_the_switch_still_resume(tmp_path: Path) -> None:
    gen = ScriptedGenerator.from_responses({"2+3": [CHAIN[len("<EXPLORATION>") :]]})
    rec = registry.Record("gsm8k-a", "What is 2+3?", "5", "math")
    run_eval(gen, {"gsm8k": [rec]}, _config(), tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    for k in ("prefill", "medical_prompt"):
        cfg.pop(k)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    run_eval(gen, {"gsm8k": [rec]}, _config(), tmp_path)  # the defaults match an old run's prompt
    with pytest.raises(UserError, match="prefill True -> False"):
        run_eval(gen, {"gsm8k": [rec]}, _config(prefill=False), tmp_path)


def test_no_prefill_rejects_an_opener() -> None:
    with pytest.raises(UserError, match="--opener"):
        _config(prefill=False, opener="I plan.")


def test_cli_flags_and_save_path() -> None:
    from e2c.eval.run import build_parser, default_save_path

    args = build_parser().parse_args(["--no-prefill", "--medical-prompt", "release"])
    assert args.no_prefill and args.medical_prompt == "release"
    base = default_save_path(_config())
    assert default_save_path(_config(prefill=False)) != base
    assert default_save_path(_config(medical_prompt="release")) != base
    r = subprocess.run(
        [sys.executable, "-m", "e2c.eval.run", "--medical-prompt", "yes"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 2 and "none, release" in r.stderr.replace("'", "")


# ---------------------------------------------------------------------------- 3. the medical prompts
def test_medical_release_prompt_messages(tiny_tok) -> None:
    from e2c.chain import E2C_MEDICAL
    from e2c.eval.runner import dataset_format

    q = "Which organ pumps blood?\nA. Liver\nB. Heart\nC. Lung\nD. Skin"
    assert E2C_MEDICAL.messages(q) == [
        {"role": "system", "content": MED_SYSTEM},
        {"role": "user", "content": q + MED_SUFFIX},
    ]
    assert E2C_MEDICAL.user_content(q + MED_SUFFIX) == q + MED_SUFFIX  # carried: not appended again
    assert E2C_MEDICAL.tags == E2C.tags and E2C_MEDICAL.prefill_assistant
    # Off by default, as in the release; on, for the medical sets only.
    assert dataset_format(_config(), "medqa") == E2C
    med = dataset_format(_config(medical_prompt="release"), "medqa")
    assert med.messages(q) == E2C_MEDICAL.messages(q)
    assert dataset_format(_config(medical_prompt="release"), "anatomy") == med
    assert dataset_format(_config(medical_prompt="release"), "gsm8k") == E2C
    assert med.render_prompt(tiny_tok, q) == (
        f"<|im_start|>system\n{MED_SYSTEM}<|im_end|>\n<|im_start|>user\n{q}{MED_SUFFIX}<|im_end|>\n"
        "<|im_start|>assistant\n<EXPLORATION>"
    )
    no_prefill = dataset_format(_config(medical_prompt="release", prefill=False), "medmcqa")
    assert no_prefill.render_prompt(tiny_tok, q).endswith("<|im_start|>assistant\n")


def test_medical_prompt_reaches_the_model(tmp_path: Path) -> None:
    gen = ScriptedGenerator.from_responses({"organ": ["plan</EXPLORATION><EXECUTION>\\boxed{B}</EXECUTION>"]})
    rec = registry.Record(
        "medqa-a", "Which organ pumps blood?", "B", "mcq", ["Liver", "Heart", "Lung", "Skin"]
    )
    res = run_eval(gen, {"medqa": [rec]}, _config(medical_prompt="release"), tmp_path)
    prompt = gen.calls[0]["prompts"][0]
    assert prompt.startswith(f"<|system|>\n{MED_SYSTEM}\n<|user|>\nWhich organ pumps blood?\nA. Liver")
    assert f"D. Skin{MED_SUFFIX}\n<|assistant|>\n<EXPLORATION>" in prompt
    assert res["datasets"]["medqa"]["pass@1"] == 1.0


# ------------------------------------------------------------- 5. SFT trains on what inference produces
def _sft_rows(question: str = "What is 2+3?") -> list[dict]:
    return [
        {
            "messages": [*E2C.messages(question), {"role": "assistant", "content": CHAIN}],
            "data_source": "t",
            "extra_info": {"index": 0},
            "loss_scope": "full",
        },
        {
            "messages": [*E2C.messages(question), {"role": "assistant", "content": CHAIN}],
            "data_source": "t",
            "extra_info": {"index": 1},
            "loss_scope": "exploration",
        },
    ]


def _check_sft_equals_inference(tok, tmp_path: Path, fmt: ChainFormat = E2C) -> None:
    from omegaconf import OmegaConf

    from e2c.sft.dataset import E2CSFTDataset

    p = write_parquet(_sft_rows(), tmp_path / "sft.parquet")
    ds = E2CSFTDataset(str(p), tok, OmegaConf.create({"pad_mode": "no_padding", "max_length": 4096}))
    full, explore = ds[0], ds[1]
    ids, mask = full["input_ids"].tolist(), full["loss_mask"].tolist()
    # What inference feeds the model: the generation prompt, then the prefilled opening tag.
    infer = tok.encode(fmt.render_prompt(tok, "What is 2+3?"), add_special_tokens=False)
    assert ids[: len(infer)] == infer
    first = mask.index(1)
    assert ids[:first] == tok.encode(
        fmt.replace(prefill_assistant=False).render_prompt(tok, "What is 2+3?"), add_special_tokens=False
    )
    assert all(mask[first:]) and not any(mask[:first])
    eot = "<|im_end|>\n"
    assert tok.decode([t for t, m in zip(ids, mask) if m]) == CHAIN + eot
    assert tok.decode(ids) == fmt.render_prompt(tok, "What is 2+3?") + CHAIN[len("<EXPLORATION>") :] + eot
    assert "<think>" not in tok.decode(ids)
    trained = [t for t, m in zip(explore["input_ids"].tolist(), explore["loss_mask"].tolist()) if m]
    assert tok.decode(trained) == CHAIN[: CHAIN.index("</EXPLORATION>") + len("</EXPLORATION>")]
    assert explore["input_ids"].tolist() == ids


def test_sft_on_qwen3_template_trains_on_the_inference_text(tmp_path: Path) -> None:
    _check_sft_equals_inference(_qwen3_tokenizer(), tmp_path)


def test_sft_on_the_tiny_model_trains_on_the_inference_text(tmp_path: Path, tiny_tok) -> None:
    _check_sft_equals_inference(tiny_tok, tmp_path)


def test_sft_on_the_embedded_model_trains_on_the_inference_text(tmp_path: Path) -> None:
    from e2c.core.models import EMBEDDED_VERSION, cache_dir

    if not any((cache_dir() / "models").glob(f"{EMBEDDED_VERSION}-*/config.json")):
        pytest.skip("the embedded model is not built in the cache yet")
    from transformers import AutoTokenizer

    from e2c.core.models import resolve_model

    _check_sft_equals_inference(AutoTokenizer.from_pretrained(resolve_model("embedded").path), tmp_path)


def test_sft_template_settings_reach_prompt_and_end_of_turn(tmp_path: Path) -> None:
    """verl's ``enable_thinking`` setting is honoured the way inference would render it with the same
    setting (Qwen3 then writes an empty think block into the generation prompt, outside the loss)."""
    from omegaconf import OmegaConf

    from e2c.sft.dataset import E2CSFTDataset

    tok = _qwen3_tokenizer()
    p = write_parquet(_sft_rows()[:1], tmp_path / "sft.parquet")
    cfg = {"pad_mode": "right", "max_length": 256, "truncation": "error", "enable_thinking_default": False}
    item = E2CSFTDataset(str(p), tok, OmegaConf.create(cfg))[0]
    n = int(item["attention_mask"].sum())
    ids, mask = item["input_ids"][:n].tolist(), item["loss_mask"][:n].tolist()
    prompt = E2C.render_chat(tok, E2C.messages("What is 2+3?"), enable_thinking=False)
    assert prompt.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n<EXPLORATION>")
    assert ids[: len(tok.encode(prompt))] == tok.encode(prompt)
    assert tok.decode([t for t, m in zip(ids, mask) if m]) == CHAIN + "<|im_end|>\n"
    assert item["input_ids"].shape[0] == 256 and int(item["loss_mask"][n:].sum()) == 0


def test_end_of_turn_is_read_from_the_template(tiny_tok) -> None:
    from e2c.sft.dataset import end_of_turn

    assert end_of_turn(tiny_tok) == "<|im_end|>\n"
    assert end_of_turn(_qwen3_tokenizer()) == "<|im_end|>\n"
    llama_like = _qwen3_tokenizer()
    llama_like.chat_template = (
        "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|eot|>{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    assert end_of_turn(llama_like) == "<|eot|>"
