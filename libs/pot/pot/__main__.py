"""`python -m pot ...`: see `pot.cli`."""

import sys

from pot.cli import main

sys.exit(main())
