"""Runs pytest on one test file for CTest; exit 77 (CTest's skip) when pytest is not installed."""
import sys

try:
    import pytest
except ImportError:
    print("pytest is not installed (scripts/setup.sh installs it): skipped")
    sys.exit(77)

sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", *sys.argv[1:]]))
