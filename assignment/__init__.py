"""Implementations of the eight problems of handout.md."""
