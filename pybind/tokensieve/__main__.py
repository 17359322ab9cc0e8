"""`python -m tokensieve` is the `tokensieve` command."""

import sys

from ._tools.cli import main

sys.exit(main())
