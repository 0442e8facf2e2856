"""Elastic Reasoning's E1-Code commands, as its README types them, translate onto e2c.eval.run."""

from __future__ import annotations

import pytest

from e2c.core.errors import UserError
from e2c.eval import elastic

E1 = ["--output-dir", "D", "--tp", "4", "--e1-mode", "True", "--e1-thinking-length", "1024",
      "--e1-solution-length", "1024"]  # fmt: skip


def _flags(argv: list[str]) -> dict[str, str]:
    out = elastic.translate(argv)
    return dict(zip(out[::2], out[1::2], strict=True))


def test_e1_code_livecodebench_and_codeforces_translate() -> None:
    lcb = _flags(["--model", "Salesforce/E1-Code-14B", "--datasets", "test_livecodebench", *E1])
    assert lcb["--dataset"] == "test_livecodebench" and lcb["--tp"] == "4" and lcb["--sample"] == "1"
    assert (lcb["--explore-budget"], lcb["--execute-budget"], lcb["--max-tokens"]) == ("1024", "1024", "2048")
    assert lcb["--format"] == "think" and lcb["--model"] == "Salesforce/E1-Code-14B"
    cf = _flags(["--model", "Salesforce/E1-Code-14B", "--datasets", "test_codeforces", *E1, "--n", "8"])
    assert cf["--dataset"] == "test_codeforces" and cf["--sample"] == "8"
    both = _flags(["--model", "M", "--datasets", "humaneval", "livecodebench@2024-08-01..2025-02-01", "mbpp"])
    assert both["--dataset"] == "humaneval,livecodebench@2024-08-01..2025-02-01,mbpp"
    with pytest.raises(UserError, match="--datasets: 'livecodebench@v9'"):
        elastic.translate(["--model", "M", "--datasets", "livecodebench@v9"])


def test_e1_code_command_prints_the_translation(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    """``main`` shows the e2c.eval.run command and hands it the translated arguments (run itself is
    replaced: this checks the translation, not a 14B model)."""
    from e2c.eval import run

    seen: list[list[str]] = []
    monkeypatch.setattr(run, "main", lambda args: seen.append(args) or 0)
    assert (
        elastic.main(["--model", "Salesforce/E1-Code-14B", "--datasets", "test_codeforces", "--n", "8", *E1])
        == 0
    )
    line = capsys.readouterr().out.strip()
    assert line.startswith(
        "[eval_model] python -m e2c.eval.run --model Salesforce/E1-Code-14B --dataset test_codeforces"
    )
    assert seen and seen[0][seen[0].index("--dataset") + 1] == "test_codeforces"
