"""Instructor tooling: stubs, release, the sandboxed judge, hidden suites, self-check, class grading."""

__version__ = "0.1.0"
