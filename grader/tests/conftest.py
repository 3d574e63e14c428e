"""The grader's own tests, all run by default; `-m "not slow"` leaves out the slow ones (grader/tests/README.md)."""

collect_ignore_glob = ["fixtures/*"]


def pytest_collection_modifyitems(items: list) -> None:
    """The slow tests first, each kind in its order: with several test processes (``-n 2``, pytest-xdist)
    the longest do not start last and run alone while the other processes wait."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
