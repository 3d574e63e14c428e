"""The grader's own tests, all run by default; `-m "not slow"` leaves out the slow ones (grader/tests/README.md)."""

from pathlib import Path

import pytest

collect_ignore_glob = ["fixtures/*"]

# The longest files (three to four minutes each under CI's load), longest first: each starts at once and runs
# beside the others rather than alone at the end. A stale entry costs only time.
LONGEST = ("selfproof/test_hostile.py", "selfproof/test_selfcheck.py", "selfproof/test_mutate.py")
HERE = Path(__file__).parent


def pytest_configure(config: pytest.Config) -> None:
    """With several test processes (``-n 3 --dist loadfile``) files are handed out in the order below:
    pytest-xdist's own reordering (by the number of tests in a file) would start the longest last."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first, then the other slow tests, then the rest, each kind in its order."""
    def rank(item: pytest.Item) -> int:
        path = item.path.relative_to(HERE).as_posix() if item.path.is_relative_to(HERE) else ""
        if path in LONGEST:
            return LONGEST.index(path)
        return len(LONGEST) + (item.get_closest_marker("slow") is None)

    items.sort(key=rank)
