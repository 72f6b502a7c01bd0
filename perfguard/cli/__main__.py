"""`python -m perfguard.cli`."""

import sys

from perfguard.cli import main

sys.exit(main())
