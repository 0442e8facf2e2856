"""A study's units and their bookkeeping: what each depends on, what a rerun does with it, the plan that
``--dry-run`` prints, and a whole run with every unit's work fabricated (:mod:`study_fixture`): a rerun
skips every unit, an interrupted unit resumes, a changed setting is refused until ``--force``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from entry_fuzz import call_main, contract_broken
from study_fixture import STUDY, fabricate_work, write_study

from e2c.core.errors import UserError
from e2c.study import work
from e2c.study.cli import main, with_backend
from e2c.study.spec import parse_study, toml_module
from e2c.study.units import (
    CONFIRM,
    SCREEN,
    Unit,
    filter_key,
    plan_actions,
    sampling_seed,
    seed_pairs,
    select_seeds,
    study_units,
    train_settings,
    unit_action,
)
from e2c.study.work import best_by_screening, confirm_set, set_flag, study_eta


def study(text: str = STUDY):
    return parse_study(toml_module().loads(text), "s.toml")


def test_units_run_in_order_with_one_filter_per_start_and_settings_cpu() -> None:
    text = (
        STUDY
        + '\n[arms.rl2]\nkind = "rl"\nstart = "sft"\nrl_steps = 2\nrl_lr = 1e-5\n'
        + '[arms.rl3]\nkind = "rl"\nstart = "sft"\nrl_steps = 2\nrl_reward_shape = "gate"\n'
    )
    s = study(text)
    units = study_units(s)
    keys = [u.key for u in units]
    assert keys[:2] == ["data", "validation"]
    # rl2 changes only its learning rate: it reads rl's filter; rl3 samples its filter with another reward
    assert filter_key(s, "rl", 0) == filter_key(s, "rl2", 0) != filter_key(s, "rl3", 0)
    filters = [u for u in units if u.kind == "filter"]
    assert len(filters) == 2 * len(s.options.seeds)
    # every unit comes after the units it reads
    pos = {k: i for i, k in enumerate(keys)}
    for u in units:
        if u.kind == "rl":
            assert pos[u.filter_key] < pos[u.key] and pos[f"arms/sft/seed{u.seed}"] < pos[u.key]
        if u.kind == "sft_continue":
            assert pos[f"arms/rl/seed{u.seed}"] < pos[u.key]
        if u.kind == "eval":
            assert pos[f"arms/{u.arm}/seed{u.seed}"] < pos[u.key]
    assert all(u.phase == CONFIRM for u in units[-12:])  # 3 arms x 2 seeds x (greedy, sampled)


def test_a_change_upstream_changes_every_unit_downstream_cpu() -> None:
    a, b = study(), study(STUDY.replace("sft_steps = 2", "sft_steps = 3"))
    ua, ub = {u.key: u.settings for u in study_units(a)}, {u.key: u.settings for u in study_units(b)}
    changed = {k for k in ua if ua[k] != ub.get(k)}
    assert "data" not in changed and "validation" not in changed
    assert filter_key(a, "rl", 0) != filter_key(b, "rl", 0)  # the filter samples the new start
    assert {
        "arms/sft/seed0",
        "arms/rl/seed0",
        "arms/rl_sft/seed0",
        "arms/rl/seed1/confirm/sampled",
    } <= changed
    # the sampling seeds differ between the phases and not between the arms
    assert sampling_seed(a, SCREEN, 1) != sampling_seed(a, CONFIRM, 1)
    assert train_settings(a, "rl_sft", 0)["shuffle_seed"] == 1  # one SFT run before it: seed + 1


UNIT = Unit("arms/a/seed0", "sft", {"x": 1})


@pytest.mark.parametrize(
    ("done", "started", "force", "want"),
    [
        (None, None, False, "run"),
        ({"settings": {"x": 1}}, {"x": 1}, False, "skip"),
        (None, {"x": 1}, False, "resume"),
        ({"settings": {"x": 2}}, None, True, "redo"),
        (None, {"x": 2}, True, "redo"),
    ],
)
def test_unit_action_cpu(done, started, force, want) -> None:
    assert unit_action(UNIT, done, started, False, force) == want


def test_unit_action_refuses_other_settings_and_foreign_files_cpu() -> None:
    with pytest.raises(
        UserError, match=r"arms/a/seed0 finished with other settings \(x 2 -> 1\); add --force"
    ):
        unit_action(UNIT, {"settings": {"x": 2}}, None, False, False)
    with pytest.raises(UserError, match="was started with other settings"):
        unit_action(UNIT, None, {"x": 2}, False, False)
    with pytest.raises(UserError, match="holds files the study did not write"):
        unit_action(UNIT, None, None, True, True)


def test_set_flag_replaces_only_before_the_overrides_cpu() -> None:
    cmd = ["bash", "x.sh", "--model", "a", "--train-data", "d", "--", "x=1"]
    assert set_flag(cmd, "--model", "b")[3] == "b"
    with pytest.raises(ValueError):
        set_flag(cmd, "--nope", "b")


def test_the_quickstart_commands_carry_the_study_s_models_and_data_cpu(tmp_path: Path) -> None:
    s = study()
    sc = work.StudyContext(s, tmp_path)
    units = {u.key: u for u in study_units(s)}
    rl = work.rl_cmd(sc, units["arms/rl/seed1"])
    assert rl[rl.index("--model") + 1] == str(tmp_path / "arms/sft/seed1/final")
    data = str(tmp_path / units["arms/rl/seed1"].filter_key / "rl.parquet")
    assert rl[rl.index("--train-data") + 1] == data == rl[rl.index("--val-data") + 1]
    assert "actor_rollout_ref.rollout.seed=1042" in rl and "data.seed=1" in rl
    fkey = units["arms/rl/seed1"].filter_key
    f = work.filter_cmd(sc, units[fkey])
    assert f[f.index("--model") + 1] == str(tmp_path / "arms/sft/seed1/final")
    assert f[f.index("--input") + 1] == str(tmp_path / fkey / "pool.parquet")
    assert f[f.index("--seed") + 1] == "1"
    ev = work.eval_cmd(sc, units["arms/rl/seed0/screen/sampled"])
    assert ev[ev.index("--data-dir") + 1] == str(tmp_path / "validation")
    assert (
        ev[ev.index("--seed") + 1] == str(sampling_seed(s, SCREEN, 0)) and ev[ev.index("--sample") + 1] == "3"
    )
    ev = work.eval_cmd(sc, units["arms/rl/seed0/confirm/greedy"])
    assert ev[ev.index("--data-dir") + 1] == str(tmp_path / "data" / "eval")


def test_best_confirm_set_and_eta_cpu() -> None:
    s = study()
    assert best_by_screening({"sft": 0.1, "rl": None, "rl_sft": 0.2}) == "rl_sft"
    assert best_by_screening({"sft": None}) is None
    assert confirm_set(s, ["rl"]) == ["sft", "rl", "rl_sft"]
    assert confirm_set(s, ["sft"]) == ["sft"]
    assert study_eta([10, 20], [(5, 10), (5, 20)]) == 90.0


def test_dry_run_prints_every_unit_and_its_command_and_writes_nothing_cpu(tmp_path: Path) -> None:
    path = write_study(tmp_path)
    out = tmp_path / "out"
    o = call_main(main, ["--study", str(path), "--out", str(out), "--dry-run"], {})
    assert o.code == 0, o.stderr
    for key in ("data", "validation", "arms/sft/seed0", "arms/rl/seed1", "arms/rl_sft/seed0/screen/sampled"):
        assert f" {key} (" in o.stdout
    assert "scripts/e2c_sft.sh" in o.stdout and "scripts/e2c_rl.sh --stage 2" in o.stdout
    assert "-m e2c.rl.passrate" in o.stdout and "-m e2c.eval.run" in o.stdout
    assert "TOTAL_TRAINING_STEPS='<equal-token steps>'" in o.stdout  # the continuation's, before RL ran
    assert "the best arm by screening" in o.stdout
    assert not out.exists()


@pytest.fixture
def fabricated(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return fabricate_work(monkeypatch)


def test_a_run_then_a_rerun_resumes_skips_and_refuses_cpu(tmp_path: Path, fabricated: list[str]) -> None:
    path = write_study(tmp_path)
    out = tmp_path / "out"
    args = ["--study", str(path), "--out", str(out)]
    o = call_main(main, args, {})
    assert o.code == 0, o.stderr[-2000:]
    summary = json.loads(o.stdout.strip().splitlines()[-1])
    assert summary["chosen"] == ["rl"]  # the fixture's rates: rl 0.6, rl_sft 0.45, sft 0.3
    assert set(summary["verdicts"]) == {
        f"rl vs {b} ({m})" for b in ("sft", "rl_sft") for m in ("avg", "greedy")
    }
    first = list(fabricated)
    assert first[:2] == ["data", "validation"] and len(set(first)) == len(first)
    assert (out / "study.md").is_file() and (out / "study.json").is_file()
    done = json.loads((out / "arms/rl/seed1/DONE.json").read_text())
    assert done["settings"] == train_settings(with_backend(study(path.read_text())), "rl", 1)

    # a rerun reuses every unit
    fabricated.clear()
    o = call_main(main, args, {})
    assert o.code == 0 and fabricated == [], fabricated
    assert o.stdout.count("complete from an earlier run") == len(first)

    # an interrupted unit (started, not complete) is resumed in its folder, the rest reused
    unit = out / "arms/rl_sft/seed1/screen/greedy"
    (unit / "DONE.json").unlink()
    o = call_main(main, args, {})
    assert o.code == 0 and fabricated == ["arms/rl_sft/seed1/screen/greedy"]
    assert "resuming the interrupted run" in o.stdout

    # a changed setting is refused, naming the unit and --force, and nothing changes
    changed = write_study(tmp_path, path.read_text().replace("rl_steps = 2", "rl_steps = 3"), "changed.toml")
    before = (out / "arms/rl/seed0/DONE.json").read_text()
    o = call_main(main, ["--study", str(changed), "--out", str(out)], {})
    assert contract_broken(o) is None and "arms/rl/seed0 finished with other settings" in o.stderr
    assert "rl_steps 2 -> 3" in o.stderr and (out / "arms/rl/seed0/DONE.json").read_text() == before

    # --force redoes the RL arm and what reads it, not its start
    fabricated.clear()
    o = call_main(main, ["--study", str(changed), "--out", str(out), "--force"], {})
    assert o.code == 0, o.stderr[-2000:]
    assert "arms/rl/seed0" in fabricated and "arms/rl_sft/seed0" in fabricated
    assert not any(k.startswith("arms/sft/") for k in fabricated) and "data" not in fabricated


def test_plan_refuses_a_folder_the_study_did_not_make_cpu(tmp_path: Path) -> None:
    s = study()
    out = tmp_path / "out"
    (out / "arms" / "sft" / "seed0").mkdir(parents=True)
    (out / "arms" / "sft" / "seed0" / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="arms/sft/seed0 holds files the study did not write"):
        plan_actions(study_units(s), out, force=True)


class Sample:
    def __init__(self, uid: str, split: str, ok: bool = True, variant: str = "solve") -> None:
        self.uid, self.split, self.ok, self.variant = uid, split, ok, variant


def test_new_problems_keep_only_texts_no_run_can_train_on_cpu() -> None:
    samples = [
        Sample("a", "sft"),
        Sample("b", "rl"),
        Sample("c", "eval"),  # held out already
        Sample("d", "eval", ok=False),  # too long
        Sample("e", "eval", variant="trace"),
        Sample("f", "eval"),
        Sample("g", "eval"),
    ]
    kept, dropped = work.new_problems(samples, {"c"}, 1, lambda s: s.ok, lambda s: s.split)
    assert [s.uid for s in kept] == ["f"]
    assert dropped == {"training_split": 2, "in_data": 1, "filters": 1}


def test_the_memory_check_runs_once_per_rl_recipe_with_work_left_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from e2c.study import cli
    from e2c.study.cli import check_memory

    s = study(STUDY + '\n[arms.rl2]\nkind = "rl"\nstart = "sft"\nrl_steps = 2\nrl_n = 4\n')
    units = study_units(s)
    seen: list[tuple[int, int]] = []
    monkeypatch.setattr(cli, "rl_memory_check", lambda cfg: seen.append((cfg.rl_batch, cfg.rl_n)))
    actions = {u.key: "run" for u in units}
    check_memory(s, units, actions)
    assert seen == [(2, 8), (2, 4)]  # one per recipe, not per seed
    seen.clear()
    check_memory(s, units, {k: "skip" for k in actions})
    assert seen == []

    def refuse(cfg):
        raise UserError("the RL stage needs about 9 GiB")

    monkeypatch.setattr(cli, "rl_memory_check", refuse)
    with pytest.raises(UserError, match="arm rl: the RL stage needs about 9 GiB"):
        check_memory(s, units, actions)


# ------------------------------------------------------------------------------------------------ filters
def test_one_filter_per_start_and_grading_keeps_the_largest_need_cpu() -> None:
    text = (
        STUDY
        + '\n[arms.rl_long]\nkind = "rl"\nstart = "sft"\nrl_steps = 5\n'
        + '[arms.rl_wide]\nkind = "rl"\nstart = "sft"\nrl_steps = 2\nrl_batch = 3\n'
        + '[arms.rl_k]\nkind = "rl"\nstart = "sft"\nrl_steps = 2\nfilter_k = 6\n'
    )
    s = study(text)
    # steps and batch decide how many prompts a run draws, not which or how they are sampled and graded
    shared = filter_key(s, "rl", 0)
    assert filter_key(s, "rl_long", 0) == filter_key(s, "rl_wide", 0) == shared != filter_key(s, "rl_k", 0)
    assert filter_key(s, "rl", 0) != filter_key(s, "rl", 1)  # another seed samples again
    filters = {u.key: u for u in study_units(s) if u.kind == "filter"}
    assert len(filters) == 2 * len(s.options.seeds)
    assert filters[shared].keep == 10  # rl 2 x 2, rl_long 5 x 2, rl_wide 2 x 3: the largest
    assert filters[filter_key(s, "rl_k", 0)].keep == 4
    assert not {"rl_steps", "rl_batch"} & set(filters[shared].settings)
    # each RL arm's own identity still holds its steps and batch
    rl, long_, wide = (train_settings(s, a, 0) for a in ("rl", "rl_long", "rl_wide"))
    assert rl["filter"] == long_["filter"] == wide["filter"]
    assert rl["settings"]["rl_steps"] == 2 and long_["settings"]["rl_steps"] == 5
    assert rl != long_ and rl["settings"]["rl_batch"] == 2 and wide["settings"]["rl_batch"] == 3


def test_the_filter_command_keeps_the_largest_need_cpu(tmp_path: Path) -> None:
    s = study(STUDY + '\n[arms.rl_long]\nkind = "rl"\nstart = "sft"\nrl_steps = 5\n')
    units = {u.key: u for u in study_units(s)}
    fkey = units["arms/rl_long/seed0"].filter_key
    assert fkey == units["arms/rl/seed0"].filter_key
    cmd = work.filter_cmd(work.StudyContext(s, tmp_path), units[fkey])
    assert cmd[cmd.index("--keep") + 1] == "10"


FILTER = Unit("filters/x", "filter", {"x": 1}, keep=10)


@pytest.mark.parametrize(
    ("done", "want"),
    [
        ({"settings": {"x": 1}, "keep": 10}, "skip"),
        ({"settings": {"x": 1}, "keep": 20}, "skip"),  # kept more than needed: a prefix is drawn
        ({"settings": {"x": 1}, "keep": 4}, "extend"),  # an arm now draws more: sample on
        ({"settings": {"x": 1}}, "extend"),
    ],
)
def test_a_filter_that_kept_too_few_is_extended_cpu(done, want) -> None:
    assert unit_action(FILTER, done, {"x": 1}, False, False) == want


def test_a_larger_need_extends_the_filter_in_its_folder_cpu(tmp_path: Path, fabricated: list[str]) -> None:
    path = write_study(tmp_path)
    out = tmp_path / "out"
    o = call_main(main, ["--study", str(path), "--out", str(out), "--screen-only"], {})
    assert o.code == 0, o.stderr[-2000:]
    fkeys = [k for k in fabricated if k.startswith("filters/")]
    assert len(fkeys) == 2 and all(
        json.loads((out / k / "DONE.json").read_text())["keep"] == 4 for k in fkeys
    )
    (out / fkeys[0] / "pool.parquet").write_text("kept")  # what the filter's rerun resumes from

    # an arm that draws more prompts from the same start joins: its seeds' filters sample on, nothing else reruns
    longer = path.read_text() + '\n[arms.rl_long]\nkind = "rl"\nstart = "sft"\nrl_steps = 5\n'
    changed = write_study(tmp_path, longer, "longer.toml")
    fabricated.clear()
    o = call_main(main, ["--study", str(changed), "--out", str(out), "--screen-only", "--dry-run"], {})
    assert o.code == 0 and fabricated == [] and o.stdout.count("  extend filters/") == 2, o.stdout
    assert "--keep 10" in o.stdout
    o = call_main(main, ["--study", str(changed), "--out", str(out), "--screen-only"], {})
    assert o.code == 0, o.stderr[-2000:]
    assert [k for k in fabricated if not k.startswith("arms/rl_long/")] == fkeys, fabricated
    assert (out / fkeys[0] / "pool.parquet").read_text() == "kept"  # not cleared
    assert all(json.loads((out / k / "DONE.json").read_text())["keep"] == 10 for k in fkeys)
    assert "sampling on from its samples file" in o.stdout


# ------------------------------------------------------------------------------------------------ --arms
def test_dry_run_honours_arms_cpu(tmp_path: Path) -> None:
    path = write_study(tmp_path)
    out = tmp_path / "out"
    o = call_main(main, ["--study", str(path), "--out", str(out), "--dry-run", "--arms", "rl"], {})
    assert o.code == 0, o.stderr
    assert "2 of 3 arms (sft, rl)" in o.stdout
    for key in ("data", "validation", "filters/sft-seed0-", "arms/sft/seed0", "arms/rl/seed1/screen/sampled"):
        assert f" {key}" in o.stdout
    assert "rl_sft" not in o.stdout and not out.exists()


def test_arms_runs_only_those_arms_and_the_report_covers_all_cpu(
    tmp_path: Path, fabricated: list[str]
) -> None:
    path = write_study(tmp_path)
    out = tmp_path / "out"
    args = ["--study", str(path), "--out", str(out)]
    o = call_main(main, [*args, "--arms", "rl"], {})
    assert o.code == 0, o.stderr[-2000:]
    assert fabricated and not any("rl_sft" in k for k in fabricated)
    summary = json.loads(o.stdout.strip().splitlines()[-1])
    assert summary["chosen"] == ["rl"]
    rep = json.loads((out / "study.json").read_text())
    assert rep["selection"]["confirmed"] == ["sft", "rl"]  # its continuation is not among --arms
    assert rep["arms"]["rl_sft"]["training"] == {"0": None, "1": None}
    assert not (out / "arms" / "rl_sft").exists()

    # the continuation alone: what it needs is complete, so only its own units run
    fabricated.clear()
    o = call_main(main, [*args, "--arms", "rl_sft", "--screen-only"], {})
    assert o.code == 0, o.stderr[-2000:]
    assert fabricated and all(k.startswith("arms/rl_sft/") for k in fabricated), fabricated
    rep = json.loads((out / "study.json").read_text())
    assert all(rep["arms"][a]["screen"] is not None for a in ("sft", "rl", "rl_sft"))
    assert rep["arms"]["rl"]["training"]["0"] is not None

    # an arm outside --arms whose settings changed is left alone, not refused
    edited = path.read_text().replace('of = "rl"\n', 'of = "rl"\nsft_lr = 1e-4\n')
    changed = write_study(tmp_path, edited, "changed.toml")
    fabricated.clear()
    o = call_main(main, ["--study", str(changed), "--out", str(out), "--arms", "rl", "--screen-only"], {})
    assert o.code == 0 and fabricated == [], (o.stderr[-2000:], fabricated)
    o = call_main(main, ["--study", str(changed), "--out", str(out), "--screen-only"], {})
    assert contract_broken(o) is None and "arms/rl_sft/seed0 finished with other settings" in o.stderr


# One SFT start shared by every RL seed (the start declares seed 0 only), as configs/study/rl_recipe.toml.
ONE_START = STUDY.replace('kind = "sft"\nsft_steps = 2\n', 'kind = "sft"\nsft_steps = 2\nseeds = [0]\n')


def test_seed_pairs_take_the_runs_a_seed_starts_from_cpu() -> None:
    s = study(ONE_START)
    assert list(s.arms["sft"].seeds) == [0]
    assert seed_pairs(s, ["sft", "rl"], [1]) == {("rl", 1), ("sft", 0)}
    assert seed_pairs(s, ["sft", "rl", "rl_sft"], [1]) == {("rl_sft", 1), ("rl", 1), ("sft", 0)}
    assert seed_pairs(s, ["sft", "rl"], [0, 1]) == {("rl", 0), ("rl", 1), ("sft", 0)}
    # against a plain loop: every unit of a chosen run, and nothing of another seed's run
    units = study_units(s)
    kept = select_seeds(units, seed_pairs(s, list(s.arms), [1]))
    for u in units:
        own = u.kind in ("data", "validation") or (u.arm, u.seed) in {("rl", 1), ("rl_sft", 1), ("sft", 0)}
        reads = u.kind == "filter" and any(k.filter_key == u.key for k in kept)
        assert (u in kept) == ((own and u.kind != "filter") or reads), u.key
    with pytest.raises(UserError, match=r"--seeds: no arm run here declares seed 5; declared: sft: \[0\]"):
        seed_pairs(s, ["sft", "rl"], [5])


def test_seeds_and_skip_screening_run_one_more_seed_and_confirm_it_cpu(
    tmp_path: Path, fabricated: list[str]
) -> None:
    path = write_study(tmp_path, ONE_START)
    out = tmp_path / "out"
    args = ["--study", str(path), "--out", str(out), "--arms", "rl", "--seeds", "1"]
    o = call_main(main, [*args, "--skip-screening", "--confirm", "rl"], {})
    assert o.code == 0, o.stderr[-2000:]
    ran = list(fabricated)
    assert "arms/sft/seed0" in ran and "arms/rl/seed1" in ran
    assert not any(k.startswith("arms/rl/seed0") for k in ran)
    assert len([k for k in ran if k.startswith("filters/")]) == 1  # seed 1's (named by its start's seed 0)
    assert not any("/screen/" in k for k in ran)
    assert {"arms/sft/seed0/confirm/sampled", "arms/rl/seed1/confirm/sampled"} <= set(ran)
    assert not (out / "arms" / "rl" / "seed0").exists()
    rep = json.loads((out / "study.json").read_text())
    assert rep["selection"]["confirmed"] == ["sft", "rl"]

    # seed 0 later: the shared start is reused, only seed 0's own units run
    fabricated.clear()
    o = call_main(
        main, ["--study", str(path), "--out", str(out), "--arms", "rl", "--seeds", "0", "--screen-only"], {}
    )
    assert o.code == 0, o.stderr[-2000:]
    assert fabricated and all("seed0" in k for k in fabricated if k.startswith("arms/"))
    assert "arms/sft/seed0" not in fabricated


RL_SEED0 = STUDY.replace("rl_steps = 2\n", "rl_steps = 2\nseeds = [0]\n").replace(
    'of = "rl"\n', 'of = "rl"\nseeds = [0]\n'
)
CONTINUE_SEED0 = STUDY.replace('of = "rl"\n', 'of = "rl"\nseeds = [0]\n')


@pytest.mark.parametrize(
    "text, extra, wanted",
    [
        (STUDY, ["--skip-screening"], "--skip-screening needs --confirm"),
        (STUDY, ["--skip-screening", "--confirm", "rl", "--screen-only"], "--skip-screening needs --confirm"),
        (STUDY, ["--seeds", "1"], "--seeds needs --confirm ARM,... (the arms to confirm) or --screen-only"),
        (STUDY, ["--seeds", "7", "--screen-only"], "--seeds: no arm run here declares seed 7"),
        (STUDY, ["--seeds", "-1", "--screen-only"], "--seeds"),
        # an arm to confirm with no run among the seeds would be reported confirmed with nothing evaluated
        (RL_SEED0, ["--seeds", "1", "--confirm", "rl"], "--confirm: arm 'rl' has no run among --seeds"),
        # the arms named, not what they need: rl_sft declares seed 0 only (its RL arm declares 0 and 1)
        (
            CONTINUE_SEED0,
            ["--arms", "rl_sft", "--seeds", "1", "--screen-only"],
            "--seeds: no arm run here declares seed 1; declared: rl_sft: [0]",
        ),
    ],
)
def test_seeds_and_skip_screening_refusals_cpu(
    tmp_path: Path, text: str, extra: list[str], wanted: str
) -> None:
    path = write_study(tmp_path, text)
    out = tmp_path / "out"
    o = call_main(main, ["--study", str(path), "--out", str(out), *extra], {})
    assert contract_broken(o) is None and o.code == 2 and wanted in o.stderr, o.stderr
    assert not out.exists()


def test_a_matched_control_trains_from_the_base_for_sft_steps_plus_rls_tokens_cpu(
    tmp_path: Path, fabricated: list[str]
) -> None:
    """``sft_matched``: the SFT start's steps plus the continuation's equal-token steps, from the base model,
    with the SFT start's data order; compared with the RL arm on the held-out set like a continuation."""
    text = STUDY + '\n[arms.total]\nkind = "sft_matched"\nof = "rl"\n'
    path = write_study(tmp_path, text)
    out = tmp_path / "out"
    o = call_main(main, ["--study", str(path), "--out", str(out), "--confirm", "rl"], {})
    assert o.code == 0, o.stderr[-2000:]
    sc = work.StudyContext(with_backend(study(text)), out)
    for seed in (0, 1):
        cont = work.continuation_steps(sc, "rl_sft", seed)
        assert cont is not None and cont >= 1
        assert work.continuation_steps(sc, "total", seed) == 2 + cont  # sft's 2 steps, then RL's tokens
        settings = train_settings(sc.study, "total", seed)
        assert settings["start"] == {"model": "tiny"} and settings["of"]["kind"] == "rl"
        assert settings["shuffle_seed"] == train_settings(sc.study, "sft", seed)["shuffle_seed"]
    cmd = work.unit_commands(sc, next(u for u in study_units(sc.study) if u.key == "arms/total/seed0"))
    assert (
        "MODEL_PATH=tiny" in cmd[0]
        and f"TOTAL_TRAINING_STEPS={2 + work.continuation_steps(sc, 'rl_sft', 0)}" in cmd[0]
    )
    rep = json.loads((out / "study.json").read_text())
    assert rep["selection"]["confirmed"] == ["sft", "rl", "rl_sft", "total"]
    against = {(c["against"], c["relation"]) for c in rep["comparisons"]["confirm"]}
    assert ("total", "sft_matched") in against and ("rl_sft", "sft_continue") in against
    md = (out / "study.md").read_text()
    assert "| total | sft_matched | base (rl's SFT + RL tokens) |" in md
    # pass@k of every confirmed arm, k = 1..3 (the fixture's 3 samples): pass@1 is avg@k, the curve rises
    for arm in ("sft", "rl", "rl_sft", "total"):
        curve = rep["arms"][arm]["confirm"]["pass_at_k"]
        assert list(curve) == ["1", "2", "3"] and curve["1"] <= curve["2"] <= curve["3"] <= 1
        assert abs(curve["1"] - rep["arms"][arm]["confirm"]["avg"]["mean"]) < 1e-9
    assert "pass@k (unbiased" in md and "| 3 |" in md
    # a viewer page per compared pair, linked (or its reason named) under "## Pages"
    assert set(rep["pages"]) == {f"view-{o}-vs-rl.html" for o in ("sft", "rl_sft", "total")}
    assert "## Pages" in md
