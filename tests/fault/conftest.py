"""pytest set-up for the fault tests: the shared harness and its fixtures."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))

from harness import database, workdir  # noqa: E402,F401  (fixtures)
