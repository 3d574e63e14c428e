"""The terminal report of one graded submission (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from .results import GradingResult


def result_table(result: GradingResult) -> Table:
    table = Table(title=f"{result.submission}: {result.score:g} / {result.max_score:g}"
                        + ("  (provisional: GPU tests not run)" if result.provisional else ""))
    table.add_column("problem")
    table.add_column("points", justify="right")
    table.add_column("tests passed", justify="right")
    table.add_column("first failure", overflow="fold", max_width=70)
    for key, problem in result.problems().items():
        if problem.total:
            not_run = f" ({problem.not_run:g} not run)" if problem.not_run else ""
            table.add_row(f"{key} {problem.name}", f"{problem.score:g} / {problem.max_score:g}{not_run}",
                          f"{problem.passed} / {problem.total}", problem.first_failure.splitlines()[0][:200]
                          if problem.first_failure else "")
    return table


def print_result(result: GradingResult, console: Console | None = None) -> None:
    console = console or Console()
    if result.error:
        console.print(f"[bold red]Autograder failed:[/] {result.error}")
    console.print(result_table(result))
    for note in result.notes:
        console.print(f"note: {note}")
    if result.isolation:
        console.print("isolation: " + "; ".join(f"{k}: {v}" for k, v in result.isolation.items()), style="dim")
    console.print(f"graded in {result.execution_time:.1f} s", style="dim")
