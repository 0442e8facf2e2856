"""The filter's resume file, ``X.passrate.jsonl``: one line per prompt's graded samples, appended batch by batch,
read back on a rerun when its settings match (another ``--band`` costs no generation); the cost is summed from it.
More: docs/data.md, "Learnable RL prompts: the pass-rate filter".
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from e2c.core.errors import UserError
from e2c.core.files import (
    read_file_bytes,
    read_records,
)
from e2c.core.run_folder import identity_diff
from e2c.data.bands import (
    pass_rate,
)
from e2c.eval.cost import total_cost
from e2c.rl.passrate.config import RECORDED_BEFORE, SAMPLE_FIELDS


# -------------------------------------------------------------------------------------- resume file
def check_resume(path: Path, settings: dict[str, Any]) -> None:
    """Refuse a samples file written with other settings (its first line), without changing it: checked
    before the model is loaded, so the refusal costs nothing."""
    try:
        with path.open("rb") as f:
            first = f.readline()
    except FileNotFoundError:
        return
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror or e}") from None
    if not first.endswith(b"\n"):  # empty, or a settings line cut by a kill: the file starts again
        return
    try:
        before = json.loads(first)["settings"]
        # A setting the file does not record is compared as RECORDED_BEFORE's value (None, refused).
        diff = identity_diff(
            {f: before.get(f, RECORDED_BEFORE.get(f)) for f in SAMPLE_FIELDS},
            {f: settings[f] for f in SAMPLE_FIELDS},
        )
    except (ValueError, KeyError, TypeError, AttributeError):
        raise UserError(f"{path} is not a pass-rate samples file; move it away to start over") from None
    if diff:
        what = ", ".join(diff)
        raise UserError(
            f"{path} holds samples drawn with other settings ({what}); delete it to start over, "
            "or give another --output"
        )


def read_samples(path: Path, settings: dict[str, Any]) -> dict[int, dict[str, Any]]:
    """``{prompt index: line}`` from a samples file written with ``settings`` (its first line).

    A file written with other settings is refused (:func:`check_resume`); a last line cut by a kill is
    removed from the file, and its prompt is sampled again.
    """
    check_resume(path, settings)
    data = read_file_bytes(path)
    if b"\n" not in data:  # empty, or a settings line cut by a kill: start the file again
        if data:
            path.write_bytes(b"")
        return {}
    hint = "move the file away to start over"
    out: dict[int, dict[str, Any]] = {}
    for n, rec in read_records(path, repair=True, what="pass-rate line", hint=hint, data=data)[1:]:
        try:
            out[int(rec["index"])] = rec
            if len(rec["correct"]) != settings["k"] or len(rec["rewards"]) != settings["k"]:
                raise ValueError(f"{len(rec['correct'])} samples, not k={settings['k']}")
        except (ValueError, KeyError, TypeError) as e:
            raise UserError(f"{path} line {n}: not a pass-rate line ({e}); {hint}") from None
    return out


def sample_line(
    index: int,
    key: str,
    correct: Sequence[int],
    completions: Sequence[Any],
    call: dict[str, Any] | None = None,
    rewards: Sequence[float] | None = None,
) -> dict[str, Any]:
    """One prompt's line of the samples file: per sample, the evaluation's correctness and the RL reward
    (``rewards``, default: the correctness); ``call``: the generation figures of its batch
    (:func:`e2c.eval.cost.batch_call`)."""
    return {
        "index": index,
        "key": key,
        "correct": [int(c) for c in correct],
        "rewards": [float(r) for r in (correct if rewards is None else rewards)],
        "pass_rate": pass_rate(correct),
        "tokens": [c.num_tokens for c in completions],
        "truncated": sum(c.finish_reason == "length" for c in completions),
        **({"call": call} if call is not None else {}),
    }


def samples_cost(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The cost of the prompts' lines (:func:`e2c.eval.cost.total_cost`): a batch's one call counted once
    however its lines were written (a batch cut by a kill and finished by a later call included). A line
    without its batch's ``"call"`` (an older toolkit's) gives its tokens and sequences; its batch is
    unknown (the batch size is not a recorded setting), so calls, prompt tokens and seconds are partial."""

    return total_cost(
        results,
        lambda r: sum(int(t) for t in r.get("tokens") or ()),
        lambda r: {"sequences": len(r.get("tokens") or ()), "records": 1},
    )
