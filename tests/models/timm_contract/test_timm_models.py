"""timm's own model tests on depthbench's models: tests/test_models.py of the pinned timm sdist, unchanged.

The file is imported (not copied) with ``timm.list_models`` answering from the selected paper models, and its
tests and fixtures are re-exported here for pytest to collect; conftest.py and timm_suite.py say how.
"""

from timm_suite import load_timm_tests

load_timm_tests()

from timm_test_models import *  # noqa: E402,F401,F403  (timm's tests and fixtures, collected here)
