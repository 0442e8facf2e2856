"""The in-process runner of the bad-input cases has a wall-clock limit: a refusal that hangs fails its case
(InProcessTimeout, which the entry guard does not swallow) and leaves the process as it found it."""

from __future__ import annotations

import os
import signal
import time

import pytest
from entry_fuzz import InProcessTimeout, call_main


def test_a_hanging_main_is_stopped_at_its_limit_cpu():
    handler = signal.getsignal(signal.SIGALRM)
    cwd, env = os.getcwd(), dict(os.environ)
    start = time.monotonic()
    with pytest.raises(InProcessTimeout, match=r"still running after 0\.3 s"):
        call_main(lambda argv: time.sleep(30), ["--x"], {"E2C_FUZZ_MARK": "1"}, limit_s=0.3)
    assert time.monotonic() - start < 5
    assert signal.getsignal(signal.SIGALRM) is handler and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
    assert os.getcwd() == cwd and dict(os.environ) == env


def test_a_quick_main_is_not_stopped_cpu():
    out = call_main(lambda argv: 2, [], {}, limit_s=5)
    assert out.code == 2 and signal.getitimer(signal.ITIMER_REAL) == (0.0, 0.0)
