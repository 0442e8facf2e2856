"""``python -m e2c.quickstart``: see :mod:`e2c.quickstart.cli`."""

import sys

from e2c.quickstart.cli import main

sys.exit(main())
