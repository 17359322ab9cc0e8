"""`python -m tokensieve` is the `tokensieve` command."""

import sys

from ._cli import main

sys.exit(main())
