"""Shared test set-up.

Under CI (CI=true) hypothesis runs derandomized: the same examples every run, so a red CI is
always reproducible. Locally it explores new examples each run (and remembers failures).
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
