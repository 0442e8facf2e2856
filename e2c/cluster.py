"""Door: ``python -m e2c.cluster`` runs :mod:`e2c.launch.cluster` (the module moved; the command did not)."""

from e2c.commandline.entry import run_main
from e2c.launch.cluster import main

if __name__ == "__main__":
    run_main(main)
