"""The pass-rate filter: its pure functions against plain reference loops, the runner on a
scripted generator (keeps exactly the prompts whose pass rate is in the band, prompts built as the RL agent
loop builds them, resume), bad input as one line with nothing written, one real run of the tiny model on
the transformers backend, and the opt-in steps of scripts/prepare_all_data.sh and scripts/gpu_recipe.sh."""

from __future__ import annotations

import json
import shlex
import subprocess
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from bad_input import assert_one_line_error, run, snapshot
from conftest import recipe_dry_run
from hypothesis import given, settings
from hypothesis import strategies as st
from killed_run import Killed

from e2c.chain import E2C
from e2c.commandline.entry import guarded
from e2c.core.errors import UserError
from e2c.data.bands import BANDS, Band, histogram, in_band, kept_indices, parse_band, pass_rate, pass_rates
from e2c.data.io import write_parquet
from e2c.generation.scripted import ScriptedGenerator
from e2c.rl.passrate.cli import build_parser, main
from e2c.rl.passrate.config import FilterConfig, PassRateFiles
from e2c.rl.passrate.filter import filter_prompts

K = 4
# prompt id -> correct samples out of K (pass rates 0, 1/4, 1/2, 3/4, 1 and a second 0 and 1/2)
WINS = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 0, 6: 2}
MCQ_ID = 7  # a multiple-choice row, graded by letter as the RL reward grades it
MCQ_WINS = 1


# ------------------------------------------------------------------------------------- pure functions
def reference_contains(band: Band, p: float) -> bool:
    """The band's membership, written out case by case."""
    if p < band.low or p > band.high:
        return False
    if p == band.low and not band.low_closed:
        return False
    return not (p == band.high and not band.high_closed)


bands = st.builds(
    lambda lo, hi, lc, hc: Band(min(lo, hi) / 20, max(lo, hi) / 20, lc, hc),
    st.integers(0, 20),
    st.integers(0, 20),
    st.booleans(),
    st.booleans(),
).filter(lambda b: not b.is_empty())
samples = st.lists(st.lists(st.booleans(), min_size=1, max_size=12), max_size=30)


@given(samples)
def test_pass_rates_match_a_loop(correct: list[list[bool]]) -> None:
    expected = []
    for row in correct:
        right = 0
        for c in row:
            if c:
                right += 1
        expected.append(right / len(row))
    assert pass_rates(correct) == expected
    assert [pass_rate([int(c) for c in row]) for row in correct] == expected


@given(bands, st.lists(st.integers(0, 8), max_size=40))
def test_band_membership_and_kept_indices_match_a_loop(band: Band, wins: list[int]) -> None:
    rates = [w / 8 for w in wins]
    keep = []
    for i, p in enumerate(rates):
        if reference_contains(band, p):
            keep.append(i)
    assert kept_indices(rates, band) == keep
    assert in_band(rates, band) == [i in keep for i in range(len(rates))]


@given(st.integers(1, 16).flatmap(lambda k: st.tuples(st.just(k), st.lists(st.integers(0, k), max_size=50))))
def test_histogram_matches_a_counter(case: tuple[int, list[int]]) -> None:
    k, wins = case
    counts = Counter(wins)
    assert histogram(wins, k) == [counts.get(j, 0) for j in range(k + 1)]


@given(bands)
@settings(max_examples=200)
def test_interval_spelling_reads_back(band: Band) -> None:
    again = parse_band(band.spec())
    assert (again.low, again.high, again.low_closed, again.high_closed) == (
        band.low,
        band.high,
        band.low_closed,
        band.high_closed,
    )


@pytest.mark.parametrize(
    ("spec", "kept"),
    [
        ("learnable", [1, 2, 3, 4, 5, 6, 7]),
        ("hard", [1, 2, 3, 4]),
        ("easy", [4, 5, 6, 7]),
        ("not-solved", [0, 1, 2, 3, 4, 5, 6, 7]),
        ("solvable", [1, 2, 3, 4, 5, 6, 7, 8]),
        ("all", list(range(9))),
        ("0,1", [1, 2, 3, 4, 5, 6, 7]),
        ("(0,1)", [1, 2, 3, 4, 5, 6, 7]),
        ("[0.25,0.75)", [2, 3, 4, 5]),
        ("(0.25, 0.75]", [3, 4, 5, 6]),
        ("[0.5,0.5]", [4]),
        (" LEARNABLE ", [1, 2, 3, 4, 5, 6, 7]),
    ],
)
def test_named_and_written_bands(spec: str, kept: list[int]) -> None:
    """Which of the pass rates 0/8 .. 8/8 each spelling keeps."""
    assert kept_indices([j / 8 for j in range(9)], parse_band(spec)) == kept


def test_the_default_band_is_learnable() -> None:
    assert parse_band(FilterConfig(model="x").band) == BANDS["learnable"]
    assert build_parser().parse_args([]).band == "learnable"
    assert BANDS["learnable"].describe() == "0 < p < 1"


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        (
            "learnabel",
            ["--band 'learnabel' is unknown", "did you mean 'learnable'", "learnable (0 < p < 1)", "(LO,HI)"],
        ),
        ("", ["--band '' is unknown", "valid: learnable"]),
        ("(0,1", ["--band '(0,1' is unknown"]),
        ("0:1", ["--band '0:1' is unknown"]),
        ("0,2", ["both ends must be pass rates in [0, 1]"]),
        ("(0.5,0.5]", ["holds no pass rate"]),
        ("(0.9,0.1)", ["holds no pass rate"]),
    ],
)
def test_bad_band_is_one_line(spec: str, words: list[str]) -> None:
    with pytest.raises(UserError) as e:
        parse_band(spec)
    assert "\n" not in str(e.value)
    for w in words:
        assert w in str(e.value)


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--k", "1"], "--k must be >= 2, got 1"),
        (["--k", "0"], "--k must be >= 2"),
        (["--temperature", "0"], "--temperature must be a positive number, got 0"),
        (["--temperature", "nan"], "--temperature"),
        (["--top-p", "0"], "--top-p must be > 0"),
        (["--max-tokens", "0"], "--max-tokens must be >= 1"),
        (["--batch-size", "0"], "--batch-size must be >= 1"),
        (["--limit", "0"], "--limit must be >= 1"),
        (["--keep", "0"], "--keep must be >= 1"),
        (["--format", "nope"], "--format: invalid choice: 'nope'"),
        (["--reward-shape", "nope"], "--reward-shape: invalid choice: 'nope'"),
        (["--band", "(0.9,0.1)"], "--band '(0.9,0.1)' holds no pass rate"),
    ],
)
def test_bad_settings_are_refused_by_their_flags(argv: list[str], words: str, capsys) -> None:
    """The settings are checked once, where they enter: each flag's declared type is the check."""
    with pytest.raises(SystemExit) as e:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and words in err, err


def test_the_flags_are_the_config_fields() -> None:
    """One declaration: every flag of a FilterConfig field reaches its field, resolved for the backend."""
    flags = "--model tiny --k 3 --band hard --temperature 0.7 --top-p 0.9 --max-tokens 64 --seed 5"
    args = build_parser().parse_args(
        [*flags.split(), "--reward-shape", "gate", "--plan-bonus", "--keep", "7"]
    )
    cfg = FilterConfig.from_flags(args, "hf")
    assert (cfg.model, cfg.k, cfg.band, cfg.temperature, cfg.top_p) == ("tiny", 3, "hard", 0.7, 0.9)
    assert (cfg.max_tokens, cfg.seed, cfg.reward_shape, cfg.plan_bonus, cfg.keep) == (64, 5, "gate", True, 7)
    assert cfg.batch_size == 32 // 3 and cfg.limit is None
    assert FilterConfig.from_flags(build_parser().parse_args(["--k", "4"]), "vllm").batch_size == 2048 // 4
    assert build_parser().parse_args(["--require-format"]).reward_shape == "gate"


# ----------------------------------------------------------------------------------- scripted runner
def rl_rows() -> list[dict]:
    """RL rows in verl's schema (as e2c.data.synthetic's rl_row writes them), one per entry of WINS, and an
    MCQ row."""
    rows = []
    for i in WINS:
        rows.append(
            {
                "prompt": E2C.messages(f"Problem {i}: what is {i} + 10?"),
                "data_source": "synthetic/arithmetic",
                "ability": "math",
                "reward_model": {"style": "rule", "ground_truth": str(i + 10)},
                "extra_info": {"index": i, "kind": "math", "difficulty": 1 + i % 3},
            }
        )
    rows.append(
        {
            "prompt": [
                {"role": "system", "content": "You are a medical expert."},
                {"role": "user", "content": f"Problem {MCQ_ID}: which? A. x B. y C. z"},
            ],
            "data_source": "medqa",
            "ability": "medical",
            "reward_model": {"style": "rule", "ground_truth": "B"},
            "extra_info": {"index": MCQ_ID, "kind": "mcq", "difficulty": 2},
        }
    )
    return rows


EXPECTED_RATES = [WINS[i] / K for i in WINS] + [MCQ_WINS / K]


def problem_id(prompt: str) -> int:
    return int(prompt.split("Problem ", 1)[1].split(":", 1)[0])


def script(prompt: str, j: int) -> str:
    """Sample j of a prompt: right for the first WINS[i] samples, wrong after (an answer, or none)."""
    i = problem_id(prompt)
    if i == MCQ_ID:
        letter = "B" if j < MCQ_WINS else "C"
        return f"Compare the options.</EXPLORATION><EXECUTION>It is \\boxed{{{letter}}}</EXECUTION>"
    answer = str(i + 10) if j < WINS[i] else ("99" if j % 2 else "")
    boxed = f"\\boxed{{{answer}}}" if answer else "no answer"
    return f"1. Add the numbers.</EXPLORATION><EXECUTION>{i} + 10: {boxed}</EXECUTION>"


@pytest.fixture()
def rl_file(tmp_path: Path) -> Path:
    return write_parquet(rl_rows(), tmp_path / "rl.parquet")


def config(**changes) -> FilterConfig:
    base = {"model": "scripted", "k": K, "max_tokens": 60, "batch_size": 3, "seed": 1}
    return FilterConfig(**{**base, **changes})


@pytest.mark.parametrize(
    "band", ["learnable", "hard", "easy", "not-solved", "solvable", "all", "(0.25,0.75]"]
)
def test_keeps_exactly_the_prompts_in_the_band(rl_file: Path, tmp_path: Path, band: str) -> None:
    out = tmp_path / "kept.parquet"
    report = filter_prompts(ScriptedGenerator(script), rl_file, out, config(band=band))
    assert report["pass_rates"] == EXPECTED_RATES
    b = parse_band(band)
    expected = [i for i, p in enumerate(EXPECTED_RATES) if reference_contains(b, p)]
    assert report["kept_rows"] == expected and report["kept"] == len(expected)
    assert report["dropped"] == len(EXPECTED_RATES) - len(expected)
    wins = [round(p * K) for p in EXPECTED_RATES]
    assert [h["prompts"] for h in report["histogram"]] == [wins.count(j) for j in range(K + 1)]
    assert [h["in_band"] for h in report["histogram"]] == [b.contains(j / K) for j in range(K + 1)]
    # The kept rows are the input's rows, every column as it was; extra_info gains the pass rate.
    source = pq.read_table(rl_file)
    kept = pq.read_table(out)
    assert kept.column_names == source.column_names
    rows, inputs = kept.to_pylist(), source.to_pylist()
    assert len(rows) == len(expected)
    for row, i in zip(rows, expected, strict=True):
        info = dict(row["extra_info"])
        assert info.pop("pass_rate") == EXPECTED_RATES[i]
        assert {**row, "extra_info": info} == inputs[i]
    files = PassRateFiles.of(out)
    assert json.loads(files.report.read_text()) == report
    assert files.plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_prompts_are_built_as_the_rl_agent_loop_builds_them(rl_file: Path, tmp_path: Path) -> None:
    gen = ScriptedGenerator(script)
    filter_prompts(gen, rl_file, tmp_path / "out.parquet", config(temperature=1.3, top_p=0.9, band="all"))
    sent = [p for call in gen.calls for p in call["prompts"]]
    # the row's chat messages (system turn included) through the chat template, then the prefilled opener
    assert sent == [E2C.render_chat(gen.tokenizer, row["prompt"], "full") for row in rl_rows()]
    assert all(p.endswith("<|assistant|>\n<EXPLORATION>") for p in sent)
    assert "<|system|>\nYou are a medical expert." in sent[-1]
    call = gen.calls[0]
    assert (call["n"], call["temperature"], call["top_p"], call["max_tokens"]) == (K, 1.3, 0.9, 60)
    assert call["stop"] == ["</EXECUTION>"]  # the rollout stops at the execution's closing tag
    assert [len(c["prompts"]) for c in gen.calls] == [3, 3, 2]  # --batch-size prompts per call


def test_resume_skips_done_prompts_and_another_band_costs_no_generation(
    rl_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "kept.parquet"
    files = PassRateFiles.of(out)

    class Killed(KeyboardInterrupt):
        pass

    def dies_on_second_call(prompt: str, j: int) -> str:
        if problem_id(prompt) >= 3:  # the second batch
            raise Killed
        return script(prompt, j)

    with pytest.raises(Killed):
        filter_prompts(ScriptedGenerator(dies_on_second_call), rl_file, out, config())
    assert not out.exists() and not files.report.exists()
    lines = files.samples.read_text().splitlines()
    assert json.loads(lines[0])["settings"]["k"] == K
    assert [json.loads(x)["index"] for x in lines[1:]] == [0, 1, 2]
    with files.samples.open("a") as f:
        f.write('{"index": 3, "key": "cut by the ki')  # a line cut by the kill: dropped, sampled again

    gen = ScriptedGenerator(script)
    report = filter_prompts(gen, rl_file, out, config())
    assert [problem_id(p) for c in gen.calls for p in c["prompts"]] == [3, 4, 5, 6, 7]
    assert report["pass_rates"] == EXPECTED_RATES
    assert len(files.samples.read_text().splitlines()) == 1 + len(EXPECTED_RATES)

    again = ScriptedGenerator(script)
    hard = filter_prompts(again, rl_file, out, config(band="hard", batch_size=5))
    assert again.calls == [] and hard["kept_rows"] == [1, 2, 6, 7]
    assert len(pq.read_table(out)) == 4


def test_other_settings_or_changed_data_are_refused(rl_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "kept.parquet"
    filter_prompts(ScriptedGenerator(script), rl_file, out, config())
    before = snapshot(tmp_path)
    with pytest.raises(UserError, match=r"holds samples drawn with other settings \(k 4 -> 2"):
        filter_prompts(ScriptedGenerator(script), rl_file, out, config(k=2))
    rows = rl_rows()
    rows[2]["reward_model"]["ground_truth"] = "13"
    changed = write_parquet(rows, tmp_path / "changed.parquet")
    with pytest.raises(UserError, match="prompt 2 differs from --input row 2"):
        filter_prompts(ScriptedGenerator(script), changed, out, config())
    before[str(changed)] = changed.read_bytes()
    assert snapshot(tmp_path) == before


def test_no_prompt_in_the_band_writes_nothing(rl_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "kept.parquet"
    out.write_bytes(b"an earlier output")
    with pytest.raises(UserError) as e:
        filter_prompts(ScriptedGenerator(script), rl_file, out, config(band="[0.3,0.45]"))
    msg = str(e.value)
    assert "no prompt left in --band [0.3,0.45] (0.3 <= p <= 0.45)" in msg
    assert "0/4: 2, 1/4: 2, 2/4: 2, 3/4: 1, 4/4: 1" in msg  # the histogram says why
    assert out.read_bytes() == b"an earlier output"
    files = PassRateFiles.of(out)
    assert not files.report.exists() and not files.plot.exists()


# ---------------------------------------------------------------------------------------- CLI input
def cli(*args: str) -> subprocess.CompletedProcess:
    return run("-m", "e2c.rl.passrate", *args, timeout=60)


BAD_INPUT = {
    "k_below_2": (lambda d, f: ["--input", str(f), "--k", "1"], ["--k must be >= 2"]),
    "unknown_band": (
        lambda d, f: ["--input", str(f), "--band", "learnabel"],
        ["--band 'learnabel' is unknown", "did you mean 'learnable'", "valid: learnable (0 < p < 1)"],
    ),
    "missing_input": (
        lambda d, f: ["--input", str(d / "nope.parquet")],
        ["--input", "nope.parquet does not exist"],
    ),
    "malformed_parquet": (
        lambda d, f: ["--input", str(_write(d / "bad.parquet", b"PAR1 not really"))],
        ["--input", "bad.parquet", "not a readable parquet file"],
    ),
    "missing_column": (
        lambda d, f: ["--input", str(write_parquet([{"question": "1+1?"}], d / "q.parquet"))],
        ["--input", "has no column 'prompt'"],
    ),
    "not_parquet": (
        lambda d, f: ["--input", str(_write(d / "rl.jsonl", b"{}\n"))],
        ["reads .parquet files"],
    ),
    "output_is_input": (lambda d, f: ["--input", str(f), "--output", str(f)], ["would destroy the input"]),
}


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_is_one_line_and_writes_nothing(case: str, rl_file: Path, tmp_path: Path) -> None:
    make, words = BAD_INPUT[case]
    args = make(tmp_path, rl_file)
    before = snapshot(tmp_path)
    r = cli("--model", "tiny", "--output", str(tmp_path / "out.parquet"), *args)
    assert_one_line_error(r, "error:", *words)
    assert snapshot(tmp_path) == before


def test_cli_no_prompt_in_the_band_is_one_line(
    rl_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import e2c.core.models
    import e2c.generation
    import e2c.rl.passrate.cli
    from e2c.core.models import ResolvedModel

    for holder in (e2c.core.models, e2c.rl.passrate.cli):
        monkeypatch.setattr(holder, "resolve_model", lambda *a, **k: ResolvedModel("m", "local", "scripted"))
    monkeypatch.setattr(e2c.generation, "make_generator", lambda *a, **k: (ScriptedGenerator(script), None))
    out = tmp_path / "out.parquet"
    # "tiny": a model reference the parser accepts without building anything (resolve_model is scripted)
    args = [
        "--model",
        "tiny",
        "--input",
        str(rl_file),
        "--output",
        str(out),
        "--k",
        "4",
        "--max-tokens",
        "60",
    ]
    code = guarded(lambda: main([*args, "--band", "(0.8,0.9)", "--quiet"]), "passrate")  # as run_main runs it
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("error: no prompt left in --band (0.8,0.9)") and "0/4: 2" in err[0]
    assert not out.exists()
    # the same samples, another band: the kept rows, a summary and one JSON line
    assert main([*args, "--quiet"]) == 0
    last = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert last["kept"] == 5 and last["prompts"] == 8 and last["histogram"] == [2, 2, 2, 1, 1]
    assert len(pq.read_table(out)) == 5


def test_every_flag_has_a_default_and_a_help_line() -> None:
    parser = build_parser()
    for action in parser._actions:
        if action.dest == "help":
            continue
        assert action.help, action.dest
        # a switch (it takes no value: --quiet, --trust-remote-code) is off unless given; every other flag
        # names its default
        assert "default" in action.help or action.nargs == 0, action.dest
    args = parser.parse_args([])
    assert (args.k, args.band, args.temperature, args.top_p, args.backend) == (
        8,
        "learnable",
        1.0,
        1.0,
        "auto",
    )
    assert args.max_tokens > 0


def test_tiny_model_on_the_transformers_backend(tmp_path: Path) -> None:
    """A real run: the tiny model (random weights) through the hf backend; it never answers right."""
    src = write_parquet(rl_rows(), tmp_path / "rl.parquet")
    r = cli(
        "--model",
        "tiny",
        "--backend",
        "hf",
        "--input",
        str(src),
        "--k",
        "2",
        "--max-tokens",
        "8",
        "--band",
        "not-solved",
        "--limit",
        "3",
        "--output",
        str(tmp_path / "kept.parquet"),
    )
    assert r.returncode == 0, r.stderr[-2000:]
    last = json.loads(r.stdout.strip().splitlines()[-1])
    assert last["prompts"] == 3 and last["kept"] == 3 and last["histogram"] == [3, 0, 0]
    report = json.loads(Path(last["report"]).read_text())
    assert report["backend"] == "hf" and report["k"] == 2 and report["model"] == "tiny"
    assert report["usage"]["sequences"] == 6
    assert len(pq.read_table(tmp_path / "kept.parquet")) == 3


# ------------------------------------------------------------------------------------------ scripts
def recipe_commands(**env: str) -> list[list[str]]:
    code, out, err = recipe_dry_run(**env)  # shared with the GPU recipe's tests (the default dry run)
    assert code == 0, err
    return [shlex.split(line[2:]) for line in out.splitlines() if line.startswith("+ ")]


@pytest.mark.slow  # two GPU-recipe dry runs, each composing every training config (15 s or more on 2 cores)
def test_gpu_recipe_filters_before_stage_1_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    from e2c.commandline import argtypes

    # The dry run names the SFT model and the prepared data, which earlier steps make: the filter checks
    # that they exist when it runs; here its parser reads the printed flags.
    monkeypatch.setattr(argtypes.ModelRef, "parse", lambda self, text: text)
    monkeypatch.setattr(argtypes.PathType, "parse", lambda self, text: text)
    assert not any("e2c.rl.passrate" in c for c in recipe_commands())  # off by default
    commands = recipe_commands(PASS_RATE_FILTER="1", PASS_RATE_K="16", PASS_RATE_MAX_TOKENS="4096")
    entries = [c[2] if c[1] == "-m" else c[1] for c in commands]
    assert entries[:5] == [
        "e2c.data.prepare",
        "e2c.sft.run",
        "e2c.rl.passrate",
        "e2c.rl.launch",
        "e2c.rl.launch",
    ]
    filt, rl1, rl2 = commands[2], commands[3], commands[4]
    args = build_parser().parse_args(filt[3:])  # every flag it prints is one the filter has
    assert (args.k, args.max_tokens, args.backend, args.band) == (16, 4096, "vllm", "learnable")
    assert args.model == rl1[rl1.index("--model") + 1]  # the SFT model RL starts from
    for stage in (rl1, rl2):
        assert stage[stage.index("--train-data") + 1] == args.output
    assert args.output.endswith("e2c_rl_train.filtered.parquet")
    later = recipe_commands(PASS_RATE_FILTER="1", FROM="rl1")
    assert later[0][later[0].index("--train-data") + 1] == args.output
    assert [c[2] for c in recipe_commands(FROM="filter")][:1] == ["e2c.rl.launch"]


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        (["--pass-rate-k", "3"], ["--pass-rate-k needs --pass-rate-filter MODEL"]),
        (["--pass-rate-filter", "tiny", "--pass-rate-k", "1"], ["--pass-rate-k must be an integer >= 2"]),
        (
            ["--pass-rate-filter", "tiny", "--pass-rate-band", "nope"],
            ["--pass-rate-band 'nope' is unknown"],
        ),
        (["--pass-rate-filter"], ["--pass-rate-filter needs a value"]),
    ],
)
def test_prepare_refuses_bad_filter_flags_before_any_work(
    tmp_path: Path, flags: list[str], words: list[str]
) -> None:
    r = run(
        "scripts/prepare_all_data.sh",
        "--skip-download",
        "--synthetic",
        "10",
        "--out",
        str(tmp_path / "out"),
        "--raw",
        str(tmp_path / "raw"),
        *flags,
    )
    assert_one_line_error(r, *words)
    assert list(tmp_path.iterdir()) == []


# -------------------------------------------------------------------------- cost, from the samples file
COST_EXACT = ("records", "generated_tokens", "calls", "sequences", "prompt_tokens")


def recorded_seconds(samples: Path) -> float:
    """The seconds the samples file's lines hold: each line's share of its batch's generation seconds."""
    lines = [json.loads(x) for x in samples.read_text().splitlines()[1:]]
    return round(sum(x["call"]["seconds"] / x["call"]["records"] for x in lines), 3)


def test_the_cost_is_the_samples_and_a_rerun_or_another_band_keeps_it(rl_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "kept.parquet"
    gen = ScriptedGenerator(script)
    report = filter_prompts(gen, rl_file, out, config(band="all"))
    cost = report["usage"]
    assert cost["calls"] == gen.usage.calls == 3 and cost["sequences"] == gen.usage.sequences == 8 * K
    assert cost["generated_tokens"] == gen.usage.generated_tokens and cost["records"] == 8
    assert cost["prompt_tokens"] == gen.usage.prompt_tokens and "partial" not in cost
    seconds = recorded_seconds(PassRateFiles.of(out).samples)
    assert report["seconds"] == cost["seconds"] == pytest.approx(seconds)
    for band, batch_size in (("all", 3), ("hard", 5)):  # the same run again, another band and batch size
        again = ScriptedGenerator(script)
        rerun = filter_prompts(again, rl_file, out, config(band=band, batch_size=batch_size))
        assert again.calls == [] and rerun["usage"] == cost and rerun["seconds"] == report["seconds"]


@pytest.mark.parametrize("how", ["killed between batches", "line cut mid-batch"])
def test_a_resumed_filter_costs_what_one_run_costs(rl_file: Path, tmp_path: Path, how: str) -> None:
    ref = filter_prompts(ScriptedGenerator(script), rl_file, tmp_path / "ref.parquet", config())["usage"]
    out = tmp_path / "kept.parquet"
    samples = PassRateFiles.of(out).samples

    if how == "killed between batches":

        def dies_on_second_call(prompt: str, j: int) -> str:
            if problem_id(prompt) >= 3:
                raise Killed
            return script(prompt, j)

        with pytest.raises(Killed):
            filter_prompts(ScriptedGenerator(dies_on_second_call), rl_file, out, config())
    else:
        filter_prompts(ScriptedGenerator(script), rl_file, out, config())
        lines = samples.read_text().splitlines()
        # The settings line, batch 0, the first line of batch 1 whole and its second cut by the kill.
        samples.write_text("\n".join(lines[:5]) + "\n" + lines[5][:30])
    gen = ScriptedGenerator(script)
    report = filter_prompts(gen, rl_file, out, config())
    assert gen.calls, "the resume sampled what was missing"
    cost = report["usage"]
    # Batch 1 cut mid-way is finished by a second, smaller call: still one batch's call in the cost.
    assert {k: cost[k] for k in COST_EXACT} == {k: ref[k] for k in COST_EXACT}
    assert cost["seconds"] == pytest.approx(recorded_seconds(samples)) and "partial" not in cost


def test_samples_of_an_older_toolkit_give_a_partial_cost(rl_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "kept.parquet"
    full = filter_prompts(ScriptedGenerator(script), rl_file, out, config(band="all"))["usage"]
    samples = PassRateFiles.of(out).samples
    lines = [json.loads(x) for x in samples.read_text().splitlines()]
    old = lines[:1] + [{k: v for k, v in x.items() if k != "call"} for x in lines[1:]]
    samples.write_text("".join(json.dumps(x) + "\n" for x in old))
    cost = filter_prompts(ScriptedGenerator(script), rl_file, out, config(band="all"))["usage"]
    # Tokens and sequences are the lines' own; the batches (so calls), prompt tokens and seconds are unknown.
    assert cost["generated_tokens"] == full["generated_tokens"] and cost["sequences"] == full["sequences"]
    assert cost["partial"] == ["calls", "prompt_tokens", "seconds"] and cost["unmetered_records"] == 8
    assert cost["calls"] == 0 and cost["seconds"] == 0


# ----------------------------------------------------------------------- the RL reward, --keep, the mix
def test_band_varies_keeps_the_prompts_whose_reward_differs(rl_file: Path, tmp_path: Path) -> None:
    """Under the gate shape a malformed right answer scores 0 and a well-formed wrong one 0.1: the reward of
    a prompt whose samples are all wrong can still vary, and "varies" keeps exactly those (a loop over the
    samples' rewards is the reference)."""
    out = tmp_path / "kept.parquet"
    report = filter_prompts(
        ScriptedGenerator(script), rl_file, out, config(band="varies", reward_shape="gate")
    )
    lines = [json.loads(x) for x in PassRateFiles.of(out).samples.read_text().splitlines()[1:]]
    by_index = {r["index"]: r for r in lines}
    varies = [i for i in range(len(EXPECTED_RATES)) if len(set(by_index[i]["rewards"])) > 1]
    assert report["kept_rows"] == varies and report["reward_varies"] == len(varies)
    assert report["pass_rates"] == EXPECTED_RATES  # the evaluation's correctness, whatever the shape
    assert report["reward_shape"] == "gate"


def test_keep_stops_once_enough_prompts_are_in_the_band(rl_file: Path, tmp_path: Path) -> None:
    full = filter_prompts(ScriptedGenerator(script), rl_file, tmp_path / "a.parquet", config())
    want = 2
    gen = ScriptedGenerator(script)
    out = tmp_path / "b.parquet"
    part = filter_prompts(gen, rl_file, out, config(keep=want))
    # batches of 3 prompts, read in order: the first batch whose prefix holds `want` kept prompts ends it
    in_band = [i for i, p in enumerate(EXPECTED_RATES) if 0 < p < 1]
    stop = next(b + 3 for b in range(0, len(EXPECTED_RATES), 3) if sum(i < b + 3 for i in in_band) >= want)
    assert part["prompts"] == min(stop, len(EXPECTED_RATES)) < full["prompts"]
    assert part["kept_rows"] == [i for i in in_band if i < stop] and part["kept"] >= want
    assert len(pq.read_table(out)) == part["kept"]
    # the mix counts what was read, by family and level (the row's data source when it names no family)
    assert sum(m["read"] for m in part["mix"].values()) == part["prompts"]
    assert sum(m["kept"] for m in part["mix"].values()) == part["kept"]
