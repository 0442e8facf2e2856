"""The grader inside ray workers (as verl's reward workers call it): the hard timeout still holds."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow


def test_grade_in_ray_worker() -> None:
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:

        @ray.remote
        def work() -> tuple[str, float, bool]:
            import time

            from e2c.rewards import grade

            grade("\\boxed{x^2}", "x\\cdot x")  # start the worker pool
            t = time.monotonic()
            r = grade("\\boxed{9^{9^{9^{9}}}}", "1", timeout=1.0)
            took = time.monotonic() - t
            # The killed worker's successor grades the next answer. Its first symbolic check costs a fresh
            # worker's warm-up (0.5 s alone here): the default 5 s bound ran out once in .ci/run, beside a
            # training run on 2 cores, so this check gives it room: what it tests is that the pool recovers.
            after = grade("\\boxed{\\{1,2\\}}", "\\{2,1\\}", timeout=60.0)
            return r.reason, took, after.reason

        reason, took, after = ray.get(work.remote(), timeout=300)
        # The tower would take forever: the answer comes back at about the timeout. The bound is loose (10x)
        # because this runs beside another worker's training run (2.6 s seen in .ci/run on 2 cores).
        assert reason == "timeout" and took < 10.0 and after == "correct", (reason, took, after)
    finally:
        ray.shutdown()
