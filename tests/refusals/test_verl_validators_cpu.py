"""verl's own dataclasses and validators run in the launchers, before any process starts: what verl would
assert inside its ray driver or its ranks (minutes in, after the model loads) is the same one line as a bad
flag. The value types of the fields users set most are :mod:`test_hydra_fields_cpu`'s; these are the
checks only verl knows."""

from __future__ import annotations

import pytest
from entry_fuzz import contract_broken, fill, load, make_context, run_in_process
from fuzz_entries import ENTRIES


@pytest.mark.parametrize(
    ("entry", "override", "message"),
    [
        (
            "e2c.rl.launch",
            "actor_rollout_ref.actor.loss_agg_mode=foo",
            "verl.utils.config.validate_config refuses the configuration: "
            "verl.workers.config.actor.FSDPActorConfig: Invalid loss_agg_mode: foo",
        ),
        (
            "e2c.sft.run",
            "optim.lr_scheduler_type=bogus",
            "verl.utils.config.omega_conf_to_dataclass (optim) refuses the configuration: "
            "verl.workers.config.optimizer.FSDPOptimizerConfig: AssertionError",
        ),
    ],
)
def test_verls_validators_refuse_in_the_launcher_cpu(
    entry: str, override: str, message: str, tmp_path
) -> None:
    e = ENTRIES[entry]
    good = fill(e.good, make_context(tmp_path), tmp_path)
    main = load(e.target).main
    ok = run_in_process(main, good, e.env)  # the good line passes every check
    assert ok.code == 0, ok.stderr[-2000:]
    outcome = run_in_process(main, [*good, override], e.env)
    assert contract_broken(outcome) is None, outcome.stderr[-2000:]
    assert message in outcome.stderr
