"""Runs pytest on one test file for CTest. pytest and the test dependencies are installed by
scripts/setup.sh: a missing one fails the suite (exit 1), it is not skipped."""
import sys

try:
    import pytest
except ImportError:
    print("pytest is not installed: run scripts/setup.sh (it installs the Python test dependencies)")
    sys.exit(1)

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
