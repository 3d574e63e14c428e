"""The terminal report of one graded submission (rich)."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from .results import GradingResult


def _tests_passed(passed: int, total: int, not_run: int, errors: int) -> str:
    """"passed / run": tests not run are not failures (the points column counts them)."""
    return f"{passed} / {total - not_run}" + (f" ({errors} error{'s' * (errors > 1)})" if errors else "")


def _clip(text: str, width: int) -> str:
    line = text.splitlines()[0] if text else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def result_table(result: GradingResult, width: int = 80) -> Table:
    """The table; the first-failure column is one line, clipped to fit ``width`` columns."""
    table = Table(title=f"{result.submission}: {result.score:g} / {result.max_score:g}"
                        + ("  (GPU pass: the GPU tests alone)" if result.options.get("gpu") == "only" else
                           "  (provisional: GPU tests not run)" if result.provisional else ""))
    rows = [(f"{key} {p.name}", f"{p.score:g} / {p.max_score:g}" + (f" ({p.not_run:g} not run)" if p.not_run else ""),
             _tests_passed(p.passed, p.total, p.not_run_tests, p.errors), p.first_failure)
            for key, p in result.problems().items() if p.total]
    used = sum(max((len(row[i]) for row in rows), default=0) for i in range(3)) + 13  # borders and padding
    for name, justify in (("problem", "left"), ("points", "right"), ("tests passed", "right")):
        table.add_column(name, justify=justify, no_wrap=True)
    table.add_column("first failure", no_wrap=True)
    for *cells, failure in rows:
        table.add_row(*cells, _clip(failure, max(16, width - used)))
    return table


def isolation_line(isolation: dict[str, str]) -> str:
    """One line: what isolation was obtained, by aspect, each aspect's first clause."""
    return "isolation: " + "; ".join(f"{k}: {str(v).split(' (')[0].split(',')[0]}" for k, v in isolation.items())


def print_result(result: GradingResult, console: Console | None = None, verbose: bool = False) -> None:
    console = console or Console()
    if result.error:
        console.print(f"[bold red]Autograder failed:[/] {result.error}")
    console.print(result_table(result, console.width))
    for note in result.notes:
        console.print(f"note: {note}")
    if result.isolation and verbose:
        console.print("isolation: " + "; ".join(f"{k}: {v}" for k, v in result.isolation.items()), style="dim")
    elif result.isolation:
        console.print(isolation_line(result.isolation) + " (--verbose for details)", style="dim", no_wrap=True,
                      overflow="ellipsis")
    console.print(f"graded in {result.execution_time:.1f} s", style="dim")
