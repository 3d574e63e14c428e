"""The judge's report on one session: what crosses from a judge session to the grading.

A judge (pytest with ``grader.judge.plugin``) fills in one ``TestRecord`` per hidden test and writes a
``JudgeReport`` with ``to_json``; ``grade`` reads it back with ``from_json``, which refuses
anything that is not a report of this ``VERSION`` (``RecordError``): a file from another kit
version, a truncated or hand-written one. Only the field names and types are checked here;
whether a session's report may earn points is ``grade``'s decision.

Words: a test's *outcome* is how it ended, its ``status`` (one of ``STATUSES``); its *record* is the
outcome with everything else the judge knows of the test; the *judge's report* is a session's records
and how the session ended, the file a judge writes (``--judge-report``).
"""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any

KIND = "kit-judge-report"
VERSION = 3  # 3: the records are under "tests", JudgeReport's own field (2 named them "outcomes")
STATUSES = ("passed", "failed", "not_run", "error")  # error: the grader failed on this test (regrade)
JUDGED = ("passed", "failed", "not_run")
NOT_JUDGED = "grading failed: the judge stopped before this test finished; regrade"  # until the judge sees it


class RecordError(ValueError):
    """Not a judge report this grader can read."""


@dataclass
class TestRecord:
    """One hidden test's result; the judge updates it as the test runs."""

    __test__ = False  # a record, not a pytest test class
    problem: str  # "P1"
    module: str  # "memory"
    name: str  # what students read
    points: float
    status: str  # its outcome: one of STATUSES
    message: str = ""
    duration: float = 0.0
    gpu: bool = False
    nodeid: str = ""
    mistakes: list[str] = field(default_factory=list)  # ids of the known mistakes the failure reproduces


@dataclass
class JudgeReport:
    """One judge session's report: a record per test, and how the session ended."""

    complete: bool  # the session ended normally, every test judged (or deliberately not run)
    tests: list[TestRecord]
    isolation: dict[str, str] = field(default_factory=dict)
    import_error: str = ""
    failed: str = ""  # why the grading of this session's problems failed (set by ``grade``, never by a judge)

    def to_json(self) -> str:
        data = {"record": KIND, "version": VERSION, **asdict(self)}
        return json.dumps(data, indent=1, allow_nan=False)

    @classmethod
    def from_json(cls, text: str) -> JudgeReport:
        """The report ``text`` holds; RecordError when it is not one of this version."""
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise RecordError(f"a judge report is JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("record") != KIND:
            raise RecordError("not a judge report (no \"record\": \"kit-judge-report\" tag)")
        if data.get("version") != VERSION:
            raise RecordError(f"a judge report of version {data.get('version')!r}; this grader reads version {VERSION} "
                              "(the judge and the grader are from different kit versions)")
        tests = data.get("tests")
        if not isinstance(tests, list):
            raise RecordError("a judge report's \"tests\" is a list")
        values = _typed(cls, {k: v for k, v in data.items() if k not in ("record", "version", "tests")})
        return cls(**values, tests=[TestRecord(**_typed(TestRecord, t)) for t in tests])


_TYPES = {"str": str, "float": (int, float), "bool": bool, "int": int, "list[str]": list, "dict[str, str]": dict}


def _typed(kind: type, data: Any) -> dict[str, Any]:
    """``data``'s fields, checked against ``kind``'s names and types; RecordError on the first mismatch."""
    if not isinstance(data, dict):
        raise RecordError(f"a {kind.__name__} is an object, got {type(data).__name__}")
    known = {f.name: f for f in fields(kind) if f.type in _TYPES}
    unknown = sorted(set(data) - set(known))
    missing = sorted(name for name, f in known.items()
                     if name not in data and f.default is MISSING and f.default_factory is MISSING)
    if unknown or missing:
        raise RecordError(f"{kind.__name__}: {'unknown field ' + unknown[0] if unknown else 'no field ' + missing[0]}")
    for name, value in data.items():
        kind_name = known[name].type
        if (isinstance(value, bool) != (kind_name == "bool") or not isinstance(value, _TYPES[kind_name])
                or (kind_name == "list[str]" and not all(isinstance(item, str) for item in value))):
            raise RecordError(f"{kind.__name__}.{name}: expected {kind_name}, got {value!r}"[:300])
    if kind is TestRecord and data["status"] not in STATUSES:
        raise RecordError(f"TestRecord.status: {data['status']!r} is not one of {', '.join(STATUSES)}")
    return dict(data)
