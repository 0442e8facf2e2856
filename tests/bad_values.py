"""The bad values the generated bad-input test (:mod:`test_entry_fuzz_cpu`) tries on each flag, by the
flag's declared value type (:mod:`e2c.commandline.argtypes` and the types entry points declare themselves).

A type with no family here gets the base one (an empty text and one that is not UTF-8); a new type that
takes more (numbers, paths, lists) adds its family to :data:`FAMILIES`, keyed by the class's module and
name (a bench script's classes by the module name :func:`entry_fuzz.load` gives the file).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass

from e2c.commandline.argtypes import Number, PathType, ValueType

# What a command line holds for an argument that is not UTF-8 (Python decodes argv with surrogateescape).
NON_UTF8 = os.fsdecode(b"\xff\xfe")


@dataclass(frozen=True)
class BadValueContext:
    """Paths the generated test makes for path-valued flags: an existing file, a folder with a file in it,
    a model folder whose weights are broken, and a place no process can create anything in."""

    file: str
    folder: str
    broken_model: str
    unwritable: str = "/proc/e2c-no-such/out"


def _fmt(v: float, kind: type) -> str:
    return str(int(v)) if kind is int else repr(float(v))


def number(t: Number, ctx: BadValueContext) -> list[str]:
    """Text that is no number, the non-finite ones, a fraction for a count, and just past each bound."""
    out = ["", NON_UTF8, "x", "nan", "inf", "-inf", "1e999"]
    if t.kind is int:
        out += ["1.5", "9" * 5000]
    step = 1 if t.kind is int else 1e-9
    if t.low is not None:
        below = t.low if t.low_open else t.low - step
        out.append(_fmt(below, t.kind))
        out.append(_fmt(t.low - 1e6, t.kind))
    if t.high is not None:
        out.append(_fmt(t.high + step if t.kind is int else t.high * 1.001 + 1e-6, t.kind))
    return [v for v in out if v not in {_fmt(s, t.kind) for s in t.special}]


def path(t: PathType, ctx: BadValueContext) -> list[str]:
    if t.mode == "file":
        return ["", NON_UTF8 + "/x", ctx.folder, "/nonexistent/e2c/file.jsonl", "/proc/self/task"]
    if t.mode == "dir":
        return ["", NON_UTF8 + "/x", ctx.file, "/nonexistent/e2c/folder"]
    if t.mode == "out_dir":  # a name that is not UTF-8 is a valid folder name on Linux
        return ["", ctx.file, ctx.file + "/sub", ctx.unwritable]
    return ["", ctx.folder, ctx.unwritable]


FAMILIES: dict[str, Callable[..., list[str]]] = {
    "e2c.commandline.argtypes.Number": number,
    "e2c.commandline.argtypes.PathType": path,
    "e2c.commandline.argtypes.AnyText": lambda t, ctx: [NON_UTF8],
    "e2c.commandline.argtypes.NameList": lambda t, ctx: [
        "",
        NON_UTF8,
        ",",
        f"{t.choices[0]},no-such-{t.noun}",
    ],
    "e2c.commandline.argtypes.Choice": lambda t, ctx: ["", NON_UTF8, f"no-such-{t.noun}", f" {t.names()[0]}"],
    "e2c.data.bands.BandSpec": lambda t, ctx: ["", NON_UTF8, "learnabel", "(0,1", "0,2", "(0.5,0.5]"],
    "e2c.commandline.argtypes.ModelRef": lambda t, ctx: [
        "",
        NON_UTF8,
        ctx.file,
        ctx.broken_model,
        "/nonexistent/e2c/model",
        "no such model",
    ],
    # The last two pass this type; the launcher's file checks refuse them before anything starts.
    "e2c.launch.checks.DataFiles": lambda t, ctx: [
        "",
        ",",
        " , ",
        NON_UTF8 + "/x.parquet",
        ctx.folder,
        "/nonexistent/e2c/data.parquet",
    ],
    "e2c.tts.cli.MethodName": lambda t, ctx: ["", NON_UTF8, "beam_search"],
    "e2c.tts.cli.SettingValue": lambda t, ctx: [
        "",
        NON_UTF8,
        "oops",
        "no_such_setting=1",
        "explore_budget=abc",
        "explore_tokens=0",
        "top_p=2",
        "seed=1.5",
        "temperature=nan",
        "opener=" + NON_UTF8,
    ],
    "e2c.eval.elastic.Switch": lambda t, ctx: ["", NON_UTF8, "maybe", "2"],
    "e2c.eval.run.GpuSpec": lambda t, ctx: ["", NON_UTF8, "0", "-1", "x", "1.5", "0,x", ",", "9" * 40],
    "e2c.eval.run.ShardSpec": lambda t, ctx: ["", NON_UTF8, "x", "1/1", "2/1", "-1/2", "0/0"],
    "e2c.recipe_check.GpusOrAuto": lambda t, ctx: number(t.count, ctx),
    "e2c.launch.tracking.ResultTrackers": lambda t, ctx: [
        NON_UTF8,
        "no-such-tracker",
        "tensorboard,no-such-tracker",
    ],
    "fuzz_bench_dtype_numerics.Arms": lambda t, ctx: [
        "",
        NON_UTF8,
        ",",
        "hf:float32",
        "warp:float32,hf",
        "hf:int3,hf",
        "hf,hf:auto",
    ],
    "fuzz_bench_dtype_numerics.Datasets": lambda t, ctx: [
        "",
        NON_UTF8,
        ",",
        "no-such-set",
        "gsm8k,no-such-set",
    ],
    "fuzz_bench_eval_throughput.Arms": lambda t, ctx: [
        "",
        NON_UTF8,
        ",",
        "warp",
        "loop,warp:float32",
        "hf:int3",
    ],
    "fuzz_bench_synthetic_data.Share": lambda t, ctx: [*number(t, ctx), "1", "1.0"],
}


def qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def bad_values_of(t: ValueType, ctx: BadValueContext) -> list[str]:
    """Texts type ``t`` must refuse: its family (the nearest class in :data:`FAMILIES`), else the base."""
    for cls in type(t).__mro__:
        if qualified(cls) in FAMILIES:
            return FAMILIES[qualified(cls)](t, ctx)
    return ["", NON_UTF8]
