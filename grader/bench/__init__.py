"""Benchmarks of the grader (scripts, run by hand; see each module's docstring)."""
