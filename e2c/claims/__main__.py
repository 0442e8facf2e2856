"""``python -m e2c.claims``: see :mod:`e2c.claims.cli`."""

import sys

from e2c.claims.cli import main

sys.exit(main())
