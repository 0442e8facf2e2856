"""The entry points the generated bad-input test covers (:mod:`test_entry_fuzz_cpu`), each with a command
line that passes every check, gathered from one file per part of the pipeline (``fuzz_entries_*.py``).
``{tmp}`` is a fresh folder; ``{file}`` / ``{folder}`` the test's earlier file and folder. Flags whose value
may be any text are named in ``free`` with why; flags left out in ``skip``, with why."""

from __future__ import annotations

import fuzz_entries_bench
import fuzz_entries_data
import fuzz_entries_eval
import fuzz_entries_train
from entry_fuzz import Entry

ENTRIES: dict[str, Entry] = {}
for _group in (fuzz_entries_eval, fuzz_entries_train, fuzz_entries_data, fuzz_entries_bench):
    _dup = ENTRIES.keys() & _group.ENTRIES.keys()
    assert not _dup, f"registered twice: {_dup}"
    ENTRIES.update(_group.ENTRIES)

# Modules with a __main__ block that are not user commands, and why.
NOT_ENTRY_POINTS: dict[str, str] = {
    "e2c.rewards._worker": "the grader pool's worker process, started by the pool with a socket path",
    "e2c.data.synthetic.tracer": "the tracer's sandboxed child process",
    "e2c.tts.run": "the library of the TTS runner; its __main__ block points at python -m e2c.tts",
    "e2c.eval.passrate": "a door: python -m e2c.eval.passrate runs e2c.rl.passrate.cli's main (registered there)",
    "e2c.cluster": "a door: python -m e2c.cluster runs e2c.launch.cluster's main (registered under that name)",
}
