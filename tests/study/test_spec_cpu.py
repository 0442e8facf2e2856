"""The study file: the examples and the fixture's study parse; every kind of mistake is one ``error:`` line
naming the table, the key and the valid choices, exit 2, and nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from entry_fuzz import call_main, contract_broken
from study_fixture import STUDY, write_study

from e2c.study.cli import main
from e2c.study.spec import BASE, KIND_KEYS, load_study, parse_study, toml_module

ROOT = Path(__file__).resolve().parents[2]


def test_the_example_studies_parse_cpu() -> None:
    s = load_study(ROOT / "configs" / "study" / "sft_length.toml")
    assert list(s.arms) == ["sft20", "sft40", "sft60", "sft120", "sft180"]
    # independent runs from the base model, each what the quickstart's --sft-steps N trains
    assert [a.cfg.sft_steps for a in s.arms.values()] == [20, 40, 60, 120, 180]
    assert all(a.start == BASE and a.kind == "sft" for a in s.arms.values())
    assert s.validation_problems == 200
    r = load_study(ROOT / "configs" / "study" / "rl_recipe.toml")
    rl = [a for a in r.arms.values() if a.kind == "rl"]
    assert len(rl) >= 8 and all(r.arms[a.start].kind == "sft" for a in rl)
    assert {a.start for a in rl} == {"sft60", "sft120"} and r.arms["sft120"].cfg.sft_steps == 120
    varied = {k for a in rl for k in a.given}
    assert {"rl_lr", "rl_steps", "rl_batch", "rl_n", "rl_explore_adv_coef"} <= varied
    assert {a.cfg.rl_explore_adv_coef for a in rl} == {1.0, 2.0}
    assert r.arms["rl_base"].cfg.rl_lr == 4e-5 and r.arms["rl_lr1e-4"].cfg.rl_lr == 1e-4
    cont = r.arms["rl_base_sft"]
    assert cont.kind == "sft_continue" and cont.of == "rl_base" and cont.start == "sft60"


def test_fast_applies_the_quickstart_preset_to_base_and_arms_cpu() -> None:
    s = load_study(ROOT / "configs" / "study" / "rl_recipe.toml", fast=True)
    assert s.fast and s.base.model == "tiny"
    assert s.validation_problems == s.base.eval_problems == 6  # the file's 200 is the full run's
    assert {a.cfg.rl_steps for a in s.arms.values() if a.kind == "rl"} == {1}
    # a setting the preset does not name stays the arm's
    assert s.arms["rl_coef1"].cfg.rl_explore_adv_coef == 1.0 and s.arms["rl_lr1e-4"].cfg.rl_lr == 1e-4


def test_a_json_study_is_the_same_study_cpu(tmp_path: Path) -> None:

    data = toml_module().loads(STUDY)
    a = parse_study(data, "x.toml")
    path = tmp_path / "x.json"
    path.write_text(json.dumps(data))
    b = load_study(path)
    assert a.arms == b.arms and a.base == b.base and a.options == b.options


def test_arm_order_puts_starts_first_and_seeds_map_to_starts_cpu() -> None:
    text = """
[arms.rl]
kind = "rl"
start = "sft"
seeds = [0, 1, 2]
[arms.cont]
kind = "sft_continue"
of = "rl"
seeds = [1]
[arms.sft]
kind = "sft"
"""
    s = parse_study(toml_module().loads(text), "x.toml")
    assert list(s.arms) == ["sft", "rl", "cont"]
    assert [s.start_seed("rl", k) for k in (0, 1, 2)] == [0, 0, 0]  # one start shared by every seed
    assert s.start_seed("cont", 1) == 0 and s.start_seed("sft", 0) is None
    assert s.sft_depth("cont") == 1 and s.sft_depth("sft") == 0
    assert s.continuations("rl") == ["cont"]
    # what --arms runs: the named arms and what they need, transitively, in the study's order
    assert s.with_needs(["cont"]) == ["sft", "rl", "cont"]
    assert s.with_needs(["rl"]) == ["sft", "rl"] and s.with_needs(["sft"]) == ["sft"]


def test_a_matched_arm_starts_where_its_rl_arms_sft_start_started_cpu() -> None:
    text = """
[arms.sft]
kind = "sft"
sft_steps = 120
seeds = [0, 1]
[arms.rl]
kind = "rl"
start = "sft"
seeds = [0, 1]
[arms.total]
kind = "sft_matched"
of = "rl"
seeds = [1]
"""
    s = parse_study(toml_module().loads(text), "x.toml")
    assert list(s.arms) == ["sft", "rl", "total"]
    t = s.arms["total"]
    assert t.start == BASE and t.of == "rl" and s.start_seed("total", 1) is None
    # the same data order as sft for its first steps: no SFT run before it on its start chain
    assert s.sft_depth("total") == 0
    assert s.continuations("rl") == ["total"] and s.with_needs(["total"]) == ["sft", "rl", "total"]
    assert "sft_steps" not in KIND_KEYS["sft_matched"]


def test_every_kind_declares_only_quickstart_fields_cpu() -> None:
    from e2c.quickstart.config import Config

    for keys in KIND_KEYS.values():
        assert set(keys) <= set(Config.field_names())
    assert "sft_steps" not in KIND_KEYS["sft_continue"]


BAD = [
    ("[studdy]\nx = 1\n" + STUDY, "unknown table 'studdy' (did you mean study?)"),
    (STUDY.replace("rl_steps = 2", "rl_lrr = 1e-5"), "unknown key 'rl_lrr' for a rl arm (did you mean rl_lr?)"),
    (STUDY.replace("sft_steps = 2", "rl_lr = 1e-5"), "unknown key 'rl_lr' for a sft arm (a setting of kind rl arms)"),
    (STUDY.replace("sft_steps = 2", 'sft_steps = "2"'), "[arms.sft] sft_steps must be a whole number, got '2'"),
    (STUDY.replace("sft_steps = 2", "sft_steps = 0"), "[arms.sft] sft_steps must be >= 1, got 0"),
    (STUDY.replace("rl_steps = 2", "rl_dr_grpo = 1"), "[arms.rl] rl_dr_grpo must be true or false, got 1"),
    (STUDY.replace("rl_steps = 2", "rl_steps = 0"), "[arms.rl] an rl arm needs rl_steps >= 1"),
    (STUDY.replace('model = "tiny"', 'dtype = "float64"'), "[base] dtype names an unknown dtype 'float64' (did you mean 'float16'?); valid: auto"),
    (STUDY.replace('start = "sft"', 'start = "sfft"'), "start = 'sfft' is not an arm (did you mean sft?)"),
    (STUDY.replace('of = "rl"', 'of = "sft"'), "of = 'sft' is not an rl arm; valid: rl"),
    (STUDY.replace('kind = "sft"\n', 'kind = "sft"\nstart = "rl"\n'), "form a cycle: sft -> rl -> sft"),
    (STUDY.replace('kind = "sft"\n', ""), "[arms.sft] no kind; valid kinds: sft, rl, sft_continue, sft_matched"),
    (STUDY.replace('kind = "sft"\n', 'kind = "ppo"\n'), "kind 'ppo'; valid kinds: sft, rl, sft_continue, sft_matched"),
    (STUDY.replace('start = "sft"\n', ""), "[arms.rl] a rl arm needs start = NAME"),
    (STUDY.replace("[arms.sft]", "[arms.base]"), "not 'base'"),
    (STUDY.replace("delta = 0.02", "delta = 0"), "[study] delta must be"),
    (STUDY.replace("seeds = [0, 1]", "seeds = [0, 0]"), "seeds must be distinct"),
    (STUDY.replace('model = "tiny"', 'families = ["arithmetic", "nope"]'), "unknown family 'nope'"),
    (STUDY.replace("sft_steps = 2", "sft_steps = 2\nseeds = [0, 1]").replace(
        'start = "sft"\nrl_steps = 2', 'start = "sft"\nrl_steps = 2\nseeds = [2]'
    ), "[arms.rl] seed 2 has no model in start arm sft"),
    (STUDY + '\n[arms.x]\nkind = "sft_continue"\nof = "rl"\nseeds = [5]\n', "[arms.x] seed 5: rl arm rl has no such seed"),
    (STUDY + '\n[arms.r0]\nkind = "rl"\nstart = "base"\n[arms.x]\nkind = "sft_matched"\nof = "r0"\n',
     "[arms.x] rl arm r0 starts from 'base', not an sft arm"),
    (STUDY + '\n[arms.x]\nkind = "sft_matched"\nof = "sft"\n', "[arms.x] of = 'sft' is not an rl arm; valid: rl"),
    ("[arms\nkind=1", "not valid TOML"),
    ("[base]\nmodel = 'tiny'\n", "no arms"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "message"), BAD, ids=[m[:40] for _, m in BAD])
def test_a_bad_study_file_is_one_line_and_writes_nothing_cpu(tmp_path: Path, text: str, message: str) -> None:
    path = write_study(tmp_path, text)
    out = tmp_path / "out"
    o = call_main(main, ["--study", str(path), "--out", str(out), "--dry-run"], {})
    assert contract_broken(o) is None, (o.code, o.stderr)
    assert message in o.stderr, o.stderr
    assert not out.exists()


def test_confirm_names_the_valid_arms_cpu(tmp_path: Path) -> None:
    path = write_study(tmp_path)
    o = call_main(main, ["--study", str(path), "--out", str(tmp_path / "o"), "--confirm", "rl,nope"], {})
    assert contract_broken(o) is None and "--confirm: unknown arm 'nope'; valid: sft, rl, rl_sft" in o.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--arms", "rl,nope"], "--arms: unknown arm 'nope'; valid: sft, rl, rl_sft"),
        (["--arms", " , "], "--arms: no arm; valid: sft, rl, rl_sft"),
        (
            ["--arms", "rl", "--confirm", "rl_sft"],
            "--confirm: arm 'rl_sft' is not run by --arms; valid with it: sft, rl",
        ),
    ],
)
def test_arms_names_the_valid_arms_and_writes_nothing_cpu(
    tmp_path: Path, args: list[str], message: str
) -> None:
    path = write_study(tmp_path)
    out = tmp_path / "o"
    for extra in ([], ["--dry-run"]):
        o = call_main(main, ["--study", str(path), "--out", str(out), *args, *extra], {})
        assert contract_broken(o) is None and o.code == 2, (o.code, o.stderr)
        assert message in o.stderr and len(o.stderr.strip().splitlines()) == 1, o.stderr
        assert not out.exists()


def test_the_study_flag_is_required_cpu() -> None:
    o = call_main(main, [], {})
    assert contract_broken(o) is None and "--study FILE is required" in o.stderr
