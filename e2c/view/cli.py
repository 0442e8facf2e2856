"""``python -m e2c.view RUN [RUN2] [--out FILE] [--labels A B]``: one self-contained HTML page of a run.

RUN is an evaluation run folder (``python -m e2c.eval.run --output-dir``) or a TTS run folder (the one that
holds ``records.jsonl``). With RUN2 (a run over the same problems) the page shows both side by side, the
problems gained and lost first, and the paired difference at the top. The page holds its data: open it in
any browser, offline. Default output: ``RUN/view.html``, or ``RUN2/view-vs-<RUN>.html`` for two runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from e2c.commandline.argtypes import EXISTING_DIR, OUTPUT_FILE, TEXT
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.flags import add_setting_flags, from_flags, setting
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError
from e2c.core.files import check_output_file
from e2c.view import default_labels, left_out_line, view_payload, write_page


@dataclass(frozen=True)
class ViewSettings:
    """The command line: each field is one flag (``python -m e2c.view --help``)."""

    runs: tuple[str, ...] = field(
        default=(), metadata=setting("one run folder, or two to compare", flag="runs", value=EXISTING_DIR)
    )
    out: str | None = field(
        default=None,
        metadata=setting("the HTML file (default: in the run folder)", flag="--out", value=OUTPUT_FILE),
    )
    labels: tuple[str, ...] | None = field(
        default=None, metadata=setting("a name per run (default: folder names)", flag="--labels", value=TEXT)
    )


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="python -m e2c.view", description=__doc__.split("\n\n")[0])
    add_setting_flags(ap, ViewSettings)
    return ap


def default_out(folders: list[Path]) -> Path:
    """``RUN/view.html``; for two runs ``RUN2/view-vs-<RUN's name>.html`` (beside the later run)."""
    if len(folders) == 1:
        return folders[0] / "view.html"
    return folders[1] / f"view-vs-{folders[0].resolve().name or 'run'}.html"


def main(argv: list[str] | None = None) -> int:
    args = from_flags(build_parser().parse_args(argv), ViewSettings)
    folders = [Path(r) for r in args.runs]
    if len(folders) > 2:
        raise UserError(f"give one run folder, or two to compare; got {len(folders)}")
    labels = list(args.labels or default_labels(folders))
    if len(labels) != len(folders):
        raise UserError(f"--labels gives {len(labels)} names for {len(folders)} runs; give one per run")
    if len(set(labels)) != len(labels):
        raise UserError(f"run names must differ, got {' '.join(labels)}; name them with --labels")
    out = Path(args.out) if args.out else default_out(folders)
    check_output_file(out, "--out")
    payload = view_payload(folders, labels)  # every input read and checked before anything is written
    checks_done()
    size = write_page(payload, out)
    note = left_out_line(payload)
    if note:
        print(note)
    problems = len(payload["problems"])
    samples = sum(len(s) for p in payload["problems"] for s in p["runs"])
    print(f"wrote {out} ({problems} problems, {samples} samples, {size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    run_main(main)
