"""``python -m hermes_lcm.cli``: the ``lcm`` command."""

import sys

from .main import main

sys.exit(main())
