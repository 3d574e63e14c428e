"""Read a session's results back and print them: survivors first with their diffs, then the scores.

A mutant is ``killed`` (the problem lost points, or the grader stopped it for running too
long), ``survived``, ``equivalent`` (survived, and listed as such), ``error`` (the grader or
the engine failed: neither a kill nor a survival) or ``pending`` (not run yet).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from cosmic_ray.work_db import use_db
from cosmic_ray.work_item import TestOutcome, WorkerOutcome
from rich.console import Console
from rich.table import Table

from .regions import Identity
from .session import OUT_OF_SCOPE, Session, identify
from .verdict import MARK

STATUSES = ("killed", "equivalent", "survived", "error", "pending")


@dataclass(frozen=True)
class Outcome:
    problem: str
    identity: Identity
    status: str
    diff: str = ""
    detail: str = ""

    @property
    def family(self) -> str:
        """The operator without its variant: ``core/ReplaceBinaryOperator_Add_Sub`` -> ``ReplaceBinaryOperator``."""
        return self.identity.operator.split("/")[-1].split("_")[0]


def outcomes(session: Session, equivalent: dict[Identity, str]) -> list[Outcome]:
    with use_db(str(session.database)) as db:
        done = {item.job_id: result for item, result in db.completed_work_items}
        items = [item for item in db.work_items  # every mutant in scope, sampled or not: identities count them all
                 if item.job_id not in done or done[item.job_id].output != OUT_OF_SCOPE]
    items.sort(key=lambda w: (w.mutations[0].start_pos, w.mutations[0].operator_name, w.mutations[0].occurrence))
    found = []
    for item, identity in zip(items, identify(session, items)):
        result = done.get(item.job_id)
        if result is not None and result.worker_outcome == WorkerOutcome.SKIPPED:
            continue
        if result is None:
            found.append(Outcome(session.problem, identity, "pending"))
            continue
        output = result.output or ""
        verdict = next((line for line in output.splitlines() if line.startswith(MARK)), output.strip()[-300:])
        if result.worker_outcome != WorkerOutcome.NORMAL or "grader error" in verdict:
            status = "error"
        elif result.test_outcome == TestOutcome.SURVIVED:
            status = "equivalent" if identity in equivalent else "survived"
        else:
            status = "killed" if result.test_outcome == TestOutcome.KILLED else "error"
        found.append(Outcome(session.problem, identity, status, result.diff or "", verdict))
    return found


def _table(title: str, groups: dict[str, Counter]) -> Table:
    table = Table(title=title)
    table.add_column("")
    table.add_column("generated", justify="right")
    for status in STATUSES:
        table.add_column(status, justify="right")
    table.add_column("score", justify="right")
    for name, counts in groups.items():
        graded = counts["killed"] + counts["survived"]
        score = f"{100 * counts['killed'] / graded:.1f}%" if graded else "-"
        table.add_row(name, str(sum(counts.values())), *[str(counts[s]) for s in STATUSES], score)
    return table


def show(found: list[Outcome], equivalent: dict[Identity, str], console: Console) -> None:
    """Survivors (with diffs), then errors and stale equivalents, then scores per problem and per operator."""
    for outcome in [o for o in found if o.status == "survived"]:
        console.print(f"[red]SURVIVED[/] {outcome.problem} {outcome.identity}")
        console.print(outcome.diff.rstrip(), markup=False, highlight=False)
    for outcome in [o for o in found if o.status == "error"]:
        console.print(f"[yellow]ERROR[/] {outcome.problem} {outcome.identity}: {outcome.detail}", markup=False)
    for outcome in [o for o in found if o.status == "killed" and o.identity in equivalent]:
        console.print(f"[yellow]listed as equivalent but killed[/] {outcome.problem} {outcome.identity}: "
                      "remove it from equivalent.toml")
    per_problem: dict[str, Counter] = {}
    per_operator: dict[str, Counter] = {}
    for outcome in found:
        per_problem.setdefault(outcome.problem, Counter())[outcome.status] += 1
        per_operator.setdefault(outcome.family, Counter())[outcome.status] += 1
    console.print(_table("mutation score per problem (killed / (killed + survived))", per_problem))
    console.print(_table("per operator", dict(sorted(per_operator.items()))))
