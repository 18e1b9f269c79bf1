"""Runs pytest on one test file for CTest. pytest and the test dependencies are installed by
scripts/setup.sh: a missing one fails the suite (exit 1), it is not skipped."""
import sys

if __name__ == "__main__":  # not when a fork server's child imports it as the main module (fresh.py)
    try:
        import pytest
    except ImportError:
        print("pytest is not installed: run scripts/setup.sh (it installs the Python test dependencies)")
        sys.exit(1)

    # --durations: the slowest cases named in the log, for the loop time (issue 46 item 8)
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "--durations=8", *sys.argv[1:]]))
