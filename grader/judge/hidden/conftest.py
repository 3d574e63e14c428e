"""Hypothesis profiles for the hidden suites.

"ci": derandomized and few examples, for the kit's own checks (selfcheck, CI).
"grading": more examples, seeded by ``grader grade --seed`` (default 0), so a grade is reproducible.
"verdict": "ci" without shrinking, for mutation verdicts: the same examples are drawn in the
same order, so whether a test fails is decided exactly as under "ci"; only the failing example
reported is not minimal.
No example database: a grade never depends on what an earlier run found.
Each profile derives from hypothesis's built-in "default", not from the profile loaded at import:
where the environment says CI, hypothesis loads its own derandomized "ci" first, and "grading"
would inherit it and ignore the seed.
One failure per test and no "explain" phase: a report shows one shrunk example and never
points at lines of the hidden suite.
"""

from hypothesis import HealthCheck, Phase, settings

_COMMON = dict(parent=settings.get_profile("default"), deadline=None, print_blob=False, database=None, report_multiple_bugs=False,
               phases=[phase for phase in Phase if phase is not Phase.explain],
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("ci", max_examples=25, derandomize=True, **_COMMON)
settings.register_profile("grading", max_examples=100, **_COMMON)
settings.register_profile("verdict", max_examples=25, derandomize=True,
                          **{**_COMMON, "phases": [phase for phase in _COMMON["phases"] if phase is not Phase.shrink]})
settings.load_profile("ci")
