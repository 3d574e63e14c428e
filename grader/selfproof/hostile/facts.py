"""The facts a row of the attack check states about one attack's grading."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...grading.results import kit_data
from . import Attack
from .grading import Graded


@dataclass
class Row:
    attack: Attack
    facts: dict[str, tuple[bool, str]] = field(default_factory=dict)
    isolation: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(ok for ok, _ in self.facts.values())


def results_fact(graded: Graded, later_digest: str, control: Graded) -> tuple[bool, str]:
    data = graded.data
    if graded.returncode != 0 or data is None:
        return False, f"no results (exit {graded.returncode}): {graded.stderr[-300:]}"
    passed = round(sum(t.points for t in graded.tests if t.status == "passed"), 4)
    problems, kit = [], kit_data(data)
    if "kit_version" not in kit or kit.get("grader_error"):
        problems.append(f"not a completed grading ({kit.get('grader_error', 'no kit_version')})")
    if data.get("score") != passed:
        problems.append(f"score {data.get('score')} is not the {passed} points of its passed tests")
    if set(graded.statuses) != set(control.statuses):
        problems.append("its tests are not the hidden suite's")
    if later_digest != graded.digest:
        problems.append("changed after grading ended")
    return (not problems), "; ".join(problems) or "the judge's"


def points_fact(attack: Attack, graded: Graded, control: Graded, reference: Graded) -> tuple[bool, str]:
    if graded.data is None:
        return False, "not graded"
    mine = graded.statuses
    expected = {n: "failed" if n.split("::")[-1] in attack.fails else s for n, s in control.statuses.items()}
    gained = sorted(n.split("::")[-1] for n in mine if mine[n] == "passed" and expected.get(n) != "passed")
    lost = sorted(n.split("::")[-1] for n in mine if mine[n] != "passed" and expected.get(n) == "passed")
    problems = []
    if graded.score > reference.score:
        problems.append(f"score {graded.score:g} above the reference's {reference.score:g}")
    if gained:
        problems.append(f"gained {', '.join(gained)}")
    if attack.expect == "budget":
        if not any("time budget" in m for m in graded.messages) or "time budget" not in graded.data.get("output", ""):
            problems.append("no time-budget note in the report")
    elif lost:
        problems.append(f"lost {', '.join(lost)}")
    summary = f"{graded.score:g} ({reference.score:g})"
    return (not problems), "; ".join(problems) or summary


def leak_fact(graded: Graded, allowed: str, secrets_: set[str]) -> tuple[bool, str]:
    leaked = sorted(line for line in secrets_ if line in graded.text and line not in allowed)
    return (not leaked), (f"{len(leaked)} lines, e.g. {leaked[0][:80]!r}" if leaked else "none")
