"""``python -m hermes_lcm.demo``."""

import sys

from .main import main

sys.exit(main())
