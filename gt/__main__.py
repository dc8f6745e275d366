"""``python -m gt`` runs the ``gt`` command."""

import sys

from gt.cli import main

sys.exit(main())
