"""pytest set-up for the integration tests: the shared harness and its fixtures."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))

from harness import database, unmigrated_database, workdir  # noqa: E402,F401  (fixtures)
