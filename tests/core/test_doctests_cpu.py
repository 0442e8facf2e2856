"""The examples in the package's docstrings run and give what they show: every module of ``e2c`` whose source
has a ``>>>`` example is imported and its examples run with :mod:`doctest`."""

from __future__ import annotations

import doctest
import importlib
import io
from pathlib import Path

import pytest

import e2c

PACKAGE = Path(e2c.__file__).parent
# Extras a module may need that a CPU install can lack: such a module is skipped, any other import error fails.
OPTIONAL = {"vllm", "sglang", "flash_attn", "megatron", "matplotlib"}
# Modules known to carry examples: the scan below must find them (a scan that finds nothing checks nothing).
MUST_HAVE = {
    "e2c.core.files",
    "e2c.launch.devices",
    "e2c.launch.checkpoints",
    "e2c.commandline.parsing",
    "e2c.rewards.grader",
}


def modules_with_examples() -> list[str]:
    """Dotted names of the package's modules whose source has a ``>>>`` line (found without importing)."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__main__.py" or ">>>" not in path.read_text(encoding="utf-8"):
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = modules_with_examples()


def test_the_scan_finds_the_known_examples() -> None:
    assert set(MODULES) >= MUST_HAVE, sorted(MUST_HAVE - set(MODULES))


@pytest.mark.parametrize("name", MODULES)
def test_examples_pass(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] in OPTIONAL:
            pytest.skip(f"{name} needs {e.name}, not installed")
        raise
    tests = [t for t in doctest.DocTestFinder().find(module) if t.examples]
    assert tests, f"{name}: its '>>>' lines are not examples doctest collects (in a docstring?)"
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for t in tests:
        runner.run(t, out=out.write)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, out.getvalue()
    assert result.attempted == sum(len(t.examples) for t in tests)
