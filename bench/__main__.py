"""`python -m bench <name> …` from the checkout's root: `tokensieve bench <name> …`."""

import sys

from tokensieve._tools.cli import main

sys.exit(main(["bench", *sys.argv[1:]]))
