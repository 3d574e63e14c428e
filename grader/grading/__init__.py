"""Grading one submission: stage it, run judge sessions over the hidden suites, write results.json."""
