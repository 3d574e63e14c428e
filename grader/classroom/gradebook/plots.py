"""The gradebook's figures (matplotlib, no display needed): totals, and scores per problem."""

from __future__ import annotations

import io
import statistics
from pathlib import Path

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ...problems import PROBLEMS, TOTAL_POINTS
from ...grading.results import write_atomic
from .records import Record
from .summary import counts, totals


def _figure() -> Figure:
    figure = Figure(figsize=(7, 4), dpi=100)
    FigureCanvasAgg(figure)
    return figure


def histogram(records: list[Record]) -> Figure:
    """Totals of the graded rows, with their mean and median; the title counts the error and missing rows."""
    scores, count = totals(records), counts(records)
    step = max(1.0, TOTAL_POINTS / 20)
    bins = [i * step for i in range(int(TOTAL_POINTS / step) + 2)]
    figure = _figure()
    axes = figure.subplots()
    axes.hist(scores, bins=bins, color="#4472c4", edgecolor="white")
    if scores:
        mean, median = statistics.fmean(scores), statistics.median(scores)
        axes.axvline(mean, color="#c00000", linestyle="--", label=f"mean {mean:.1f}")
        axes.axvline(median, color="#333333", linestyle=":", label=f"median {median:g}")
        axes.legend(loc="best")
    axes.set_xlabel(f"total (out of {TOTAL_POINTS})")
    axes.set_ylabel("students")
    axes.yaxis.set_major_locator(MaxNLocator(integer=True))
    axes.set_title(f"Totals of {len(scores)} graded submissions ({count['error']} error rows, "
                   f"{count['missing']} missing: not shown)")
    axes.set_xlim(0, bins[-1])
    figure.tight_layout()
    return figure


def problem_scores(records: list[Record]) -> Figure:
    """One box per problem: the graded rows' scores as a percentage of its points, the mean marked."""
    graded = [r for r in records if r.status == "graded"]
    keys, percents = [], []
    for index, (key, problem) in enumerate(PROBLEMS.items()):
        keys.append(f"{key}\n{problem.module}")
        percents.append([100 * r.problems[index] / problem.points for r in graded if r.problems[index] is not None])
    figure = _figure()
    axes = figure.subplots()
    shown = [i for i, values in enumerate(percents) if values]
    if shown:
        axes.boxplot([percents[i] for i in shown], positions=[i + 1 for i in shown], showmeans=True,
                     meanprops={"marker": "D", "markerfacecolor": "#c00000", "markeredgecolor": "#c00000"})
    axes.set_xticks(range(1, len(keys) + 1), keys)
    axes.set_xlim(0.5, len(keys) + 0.5)
    axes.set_ylim(-5, 105)
    axes.set_ylabel("score (% of the problem's points)")
    axes.set_title(f"Scores per problem, {len(graded)} graded submissions (diamond: mean)")
    figure.tight_layout()
    return figure


def write_png(figure: Figure, path: Path) -> None:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", metadata={"Software": None})
    write_atomic(path, buffer.getvalue())
