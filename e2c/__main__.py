"""``python -m e2c``: the ``e2c`` command (:mod:`e2c.commandline.command`) where the console script is not installed."""

from e2c.commandline.command import console

console()
