"""``python -m cellgraph`` (also what ``torchrun -m cellgraph`` runs)."""

import sys

from cellgraph.cli import main

sys.exit(main())
