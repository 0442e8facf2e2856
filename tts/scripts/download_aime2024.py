"""Download AIME 2024 into the layout ``tts/run_tts.py`` reads, as the paper's ``tts/scripts/download_aime2024.py``.

    cd tts && python scripts/download_aime2024.py        # -> data/processed/eval/aime24.parquet
    python tts/scripts/download_aime2024.py --force      # fetch again over an existing file

It fetches the registry's hub copy of ``aime24`` and writes it in the registry schema to the project's
``data/processed/eval`` (the first folder ``run_tts.py`` searches after ``--data-dir``). With no hub, one
line says so and names the offline alternative: ``python tts/run_tts.py --data-dir DIR`` with a folder holding
``aime24.jsonl`` or ``.parquet``. Exit status 0 when the file is there, 2 otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

# Run from tts/ with the checkout not installed: its e2c is the one next to this folder.
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from e2c.commandline.argtypes import OUTPUT_DIR
from e2c.commandline.entry import checks_done, run_main
from e2c.commandline.parsing import ArgumentParser
from e2c.core.errors import UserError

NAME = "aime24"


def build_parser() -> ArgumentParser:
    ap = ArgumentParser(prog="download_aime2024.py", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out",
        type=OUTPUT_DIR,
        default=None,
        help="folder for aime24.parquet (default: the project's data/processed/eval)",
    )
    ap.add_argument("--force", action="store_true", help="download again when the file exists (default: off)")
    return ap


def main(argv: list[str] | None = None) -> int:
    from e2c.core.files import check_output_dir
    from e2c.data.io import write_parquet
    from e2c.data.registry import get_spec, hub_records, project_eval_dir

    args = build_parser().parse_args(argv)
    out = args.out or project_eval_dir()
    dest = out / f"{NAME}.parquet"
    check_output_dir(out, "--out")
    if dest.is_file() and not args.force:
        print(f"{dest} is already there (--force fetches it again)")
        return 0
    spec = get_spec(NAME)
    checks_done()
    try:
        recs = hub_records(NAME)
    except UserError as e:
        raise UserError(
            f"{e}; offline, pass a folder with {NAME}.jsonl or .parquet to python tts/run_tts.py --data-dir DIR"
        ) from None
    write_parquet([r.to_dict() for r in recs], dest)
    print(f"wrote {dest} ({len(recs)} problems from {spec.hub_source})")
    return 0


if __name__ == "__main__":
    run_main(main)
