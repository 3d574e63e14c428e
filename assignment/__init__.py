"""Implementations of the problems of handout.md."""
