"""Hypothesis profiles for the hidden suites: "ci" (derandomized, few examples) and "grading"."""

from hypothesis import HealthCheck, settings

_COMMON = dict(deadline=None, print_blob=False,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", max_examples=25, derandomize=True, **_COMMON)
settings.register_profile("grading", max_examples=100, **_COMMON)
settings.load_profile("ci")
