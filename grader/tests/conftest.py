"""The grader's own tests. Fast ones run by default; see grader/tests/README.md."""

collect_ignore_glob = ["fixtures/*"]
