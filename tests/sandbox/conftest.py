"""Records each hostile test's outcome (attack, backend, outcome) when ``$E2C_CONTAINMENT_ROWS`` names a
file: ``tests/sandbox/containment_table.py`` runs the tests that way and writes docs/code.md's table."""

from __future__ import annotations

import json
import os

import pytest

ROWS_ENV = "E2C_CONTAINMENT_ROWS"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    path = os.environ.get(ROWS_ENV)
    rep = outcome.get_result()
    if not path or item.module.__name__.rpartition(".")[2] != "test_hostile_cpu":
        return
    if rep.when == "call" or (rep.when == "setup" and rep.skipped):
        doc = (item.function.__doc__ or item.name).strip().splitlines()
        attack = " ".join(line.strip() for line in doc[: doc.index("") if "" in doc else len(doc)])
        params = getattr(item, "callspec", None)
        backend = ""
        case = ""
        if params is not None:
            backend = str(params.params.get("grader_sbx", params.params.get("sbx", "")))
            inside = item.name[item.name.index("[") + 1 : -1]
            case = inside.removeprefix(backend + "-").removesuffix("-" + backend)
            case = "" if case == backend else case
        if rep.passed:
            result = "held"
        elif rep.skipped:
            reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
            result = "skipped: " + reason.removeprefix("Skipped: ")
        else:
            result = "NOT HELD"
        row = {
            "test": item.originalname,
            "attack": attack,
            "case": case,
            "backend": backend,
            "outcome": result,
        }
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
