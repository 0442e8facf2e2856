"""What the filter writes besides the kept rows: the report (``X.passrate.json``), the family mix, the kept
table with ``extra_info.pass_rate``, and the histogram (``X.passrate.png``).
More: docs/data.md, "Learnable RL prompts: the pass-rate filter".
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from e2c.core.errors import UserError
from e2c.core.files import (
    temp_sibling,
)
from e2c.core.runinfo import git_commit
from e2c.data.bands import (
    Band,
    reward_varies,
)
from e2c.data.io import write_table
from e2c.data.schema import validate_rows
from e2c.eval.plots import pyplot
from e2c.rl.passrate.config import FilterConfig, PassRateFiles
from e2c.rl.passrate.samples import samples_cost


def build_report(
    cfg: FilterConfig,
    band: Band,
    input_path: str | Path,
    files: PassRateFiles,
    results: Sequence[dict[str, Any]],
    counts: Sequence[int],
    keep: Sequence[int],
    gen: Any,
) -> dict[str, Any]:
    """The report's content (docs/data.md, the pass-rate filter). Its ``usage`` and ``seconds`` are the cost of the
    ``results`` lines (:func:`samples_cost`), not of this process's generator: a rerun that generates
    nothing reports what the samples cost."""

    kept = set(keep)
    rates = [r["pass_rate"] for r in results]
    samples = max(1, len(results) * cfg.k)
    usage = samples_cost(results)
    return {
        "input": str(input_path),
        "output": str(files.output),
        "samples_file": str(files.samples),
        "model": cfg.model,
        **({"subfolder": cfg.subfolder} if cfg.subfolder else {}),
        **cfg.extra,
        "backend": getattr(gen, "name", type(gen).__name__),
        "format": cfg.format,
        "k": cfg.k,
        "band": {"spec": cfg.band, "name": band.name, "interval": band.spec(), "describe": band.describe()},
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "max_tokens": cfg.max_tokens,
        "seed": cfg.seed,
        "reward_shape": cfg.reward_shape,
        "plan_bonus": cfg.plan_bonus,
        "prompts": len(results),
        # prompts whose samples' rewards differ: the GRPO groups with an advantage under the start model
        "reward_varies": sum(reward_varies(r["rewards"]) for r in results),
        "kept": len(keep),
        "dropped": len(results) - len(keep),
        "never_solved": counts[0],
        "always_solved": counts[-1],
        "mean_pass_rate": sum(rates) / max(1, len(rates)),
        "truncated_share": sum(r["truncated"] for r in results) / samples,
        "mean_response_tokens": sum(sum(r["tokens"]) for r in results) / samples,
        "histogram": [
            {"correct": j, "pass_rate": j / cfg.k, "prompts": c, "in_band": band.contains(j / cfg.k)}
            for j, c in enumerate(counts)
        ],
        "pass_rates": rates,
        "kept_rows": [i for i in range(len(results)) if i in kept],
        "usage": usage,
        "seconds": usage["seconds"],  # generation seconds the lines recorded
        "git_commit": git_commit(),
    }


def family_mix(
    rows: Sequence[Mapping[str, Any]], results: Sequence[Mapping[str, Any]], keep: Sequence[int]
) -> dict[str, dict[str, Any]]:
    """Per ``family/L<level>`` of the rows' ``extra_info`` (``data_source`` when a row names no family):
    prompts read, kept, and their mean pass rate (the evaluation's correctness), sorted by name.

    >>> rows = [{"extra_info": {"family": "f", "difficulty": 1}}] * 2
    >>> family_mix(rows, [{"pass_rate": 0.5}, {"pass_rate": 0.0}], [0])
    {'f/L1': {'read': 2, 'kept': 1, 'mean_pass_rate': 0.25}}
    """
    kept = set(keep)
    out: dict[str, dict[str, Any]] = {}
    for i, (row, res) in enumerate(zip(rows, results, strict=True)):
        info = row.get("extra_info") or {}
        name = str(info.get("family") or row.get("data_source") or "?")
        if info.get("difficulty") is not None:
            name += f"/L{info['difficulty']}"
        m = out.setdefault(name, {"read": 0, "kept": 0, "rate_sum": 0.0})
        m["read"] += 1
        m["kept"] += i in kept
        m["rate_sum"] += float(res["pass_rate"])
    return {
        k: {"read": m["read"], "kept": m["kept"], "mean_pass_rate": m["rate_sum"] / m["read"]}
        for k, m in sorted(out.items())
    }


def with_pass_rates(table: Any, keep: Sequence[int], rates: Sequence[float]) -> Any:
    """The kept rows of ``table`` with every column as it was, and ``pass_rate`` added to (or replaced in)
    each row's ``extra_info`` struct; a table whose ``extra_info`` is not a struct keeps its rows unchanged."""
    import pyarrow as pa

    sub = table.take(pa.array(list(keep), type=pa.int64()))
    at = sub.schema.get_field_index("extra_info")
    if at < 0 or not pa.types.is_struct(sub.schema.field(at).type):
        return sub
    col = sub.column(at).combine_chunks()
    fields = [f for f in col.type if f.name != "pass_rate"]
    children = [col.field(f.name) for f in fields]
    fields.append(pa.field("pass_rate", pa.float64()))
    children.append(pa.array([float(rates[i]) for i in keep], type=pa.float64()))
    mask = col.is_null() if col.null_count else None
    merged = pa.StructArray.from_arrays(children, fields=fields, mask=mask)
    return sub.set_column(at, pa.field("extra_info", merged.type), merged)


def write_rl_table(table: Any, path: Path) -> None:
    """Check the rows against the rl schema, then write the table (:func:`e2c.data.io.write_table`,
    atomically)."""

    validate_rows(table.to_pylist(), "rl", str(path))
    write_table(table, path)


def plot_histogram(report: dict[str, Any], path: Path) -> None:
    """Prompts per number of correct samples, the bins the band keeps coloured; written atomically."""

    plt = pyplot()
    bins = report["histogram"]
    k = report["k"]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    xs = [b["correct"] for b in bins]
    ys = [b["prompts"] for b in bins]
    colors = ["C0" if b["in_band"] else "C7" for b in bins]
    ax.bar(xs, ys, 0.8, color=colors)
    for x, y in zip(xs, ys, strict=True):
        ax.annotate(
            str(y), (x, y), ha="center", va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points"
        )
    ax.set_xticks(xs, [f"{j}/{k}" for j in xs])
    ax.set_xlabel(f"correct samples out of k={k} (pass rate)")
    ax.set_ylabel("prompts")
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    kept = f"kept: {report['band']['describe']} ({report['kept']} prompts)"
    dropped = f"dropped ({report['dropped']} prompts)"
    ax.legend(handles=[Patch(color="C0", label=kept), Patch(color="C7", label=dropped)])
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, max([*ys, 1]) * 1.15)  # room for the counts above the bars
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(f"Pass rates of {report['prompts']} RL prompts, T={report['temperature']:g}")
    fig.tight_layout()
    tmp = temp_sibling(path)
    try:
        fig.savefig(tmp, dpi=110, format="png")
        os.replace(tmp, path)
    except OSError as e:
        raise UserError(f"cannot write {path}: {e.strerror or e}") from None
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
