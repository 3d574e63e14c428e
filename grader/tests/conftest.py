"""The grader's own tests, all run by default; `-m "not slow"` leaves out the slow ones (grader/tests/README.md)."""

collect_ignore_glob = ["fixtures/*"]
