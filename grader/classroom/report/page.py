"""The class report's HTML: one page, inline CSS and SVG, nothing fetched, no script."""

from __future__ import annotations

import io
import os
import statistics
from collections.abc import Sequence
from pathlib import Path

from jinja2 import Environment
from markupsafe import Markup

from ...problems import PROBLEMS, TOTAL_POINTS
from ..gradebook.inputs import OVERRIDDEN, Change
from ..gradebook.late import UNKNOWN
from ..gradebook.plots import histogram, problem_scores
from ..gradebook.records import NOT_IN_ROSTER, GradebookError, Record, number, read_results
from ..gradebook.summary import counts, known_mistakes, most_failed, outcome, problem_means, tally_tests, totals
from ..show import find, student_view
from ..similarity.pairs import Review, grouped

TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Class report</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 70em; color: #222; }
table { border-collapse: collapse; margin: .5em 0 1em; } td, th { border: 1px solid #ccc; padding: .2em .6em; }
td.n { text-align: right; } .figures { display: flex; flex-wrap: wrap; gap: 1em; } .figures svg { max-width: 100%; height: auto; }
pre { background: #f7f7f7; padding: .6em; white-space: pre-wrap; } .error { color: #a00; }
.provisional { background: #fff3cd; padding: .5em; }
</style></head><body>
<h1>Class report</h1>
<p id="mean">{{ count.graded + count.error + count.missing }} students: {{ count.graded }} graded, {{ count.error }} errors,
{{ count.missing }} missing.{% if mean is not none %} Class mean <strong>{{ "%.2f"|format(mean) }}</strong> out of {{ total }}
(median {{ median }}, graded rows only; error and missing rows are 0 in the gradebook).{% endif %}</p>
{% if provisional %}<p class="provisional" id="provisional"><strong>Provisional:</strong> {{ provisional|length }} of
{{ count.graded }} grades have GPU tests not run (flagged in the students' table); their totals are not final. Merge
the GPU pass (grader batch --gpu only) before posting them.</p>{% endif %}
<div class="figures">{{ histogram }}{{ problems }}</div>
<h2>Per problem</h2>
<p>Mean % and tests passed both leave tests not run (GPU tests without a GPU) out.</p>
<table><tr><th>problem</th><th>graded</th><th>mean</th><th>points</th><th>mean %</th><th>tests passed</th><th>not run</th></tr>
{% for m in per_problem %}<tr><td>{{ m.key }} {{ m.module }}</td><td class="n">{{ m.graded }}</td>
<td class="n">{{ "%.2f"|format(m.mean) }}</td><td class="n">{{ m.points }}</td><td class="n">{{ m.percent }}</td>
<td class="n">{{ m.rate }}</td><td class="n">{{ m.not_run }}</td></tr>{% endfor %}</table>
<h2>Tests most often failed</h2>
<p>Wrong answers only: a test that met a function still a stub counts as not attempted ({{ not_attempted }} rows
left at least one function unwritten).</p>
{% if failed %}<ol>{% for name, n in failed %}<li>{{ name }}: failed by {{ n }} of {{ judged }}</li>{% endfor %}</ol>
{% else %}<p>No test failed.</p>{% endif %}
<h2>Known mistakes per problem (what to re-teach)</h2>
{% if mistakes %}<table><tr><th>problem</th><th>mistake</th><th>what it is</th><th>students</th><th>who</th></tr>
{% for problem, mistake, who in mistakes %}<tr><td>{{ problem }}</td><td>{{ mistake }}</td><td>{{ explain(mistake) }}</td>
<td class="n">{{ who|length }}</td><td>{% for s in who[:12] %}<a href="#student-{{ s }}">{{ s }}</a>{{ ", " if not loop.last }}{% endfor %}
{% if who|length > 12 %} and {{ who|length - 12 }} more{% endif %}</td></tr>{% endfor %}
</table>{% else %}<p>No failed test matched a known mistake.</p>{% endif %}
<h2>Errors and missing</h2>
{% if unfinished %}<table><tr><th>student</th><th>status</th><th>reason</th></tr>
{% for r in unfinished %}<tr><td><a href="#student-{{ r.student }}">{{ r.student }}</a></td><td class="error">{{ r.status }}</td>
<td>{{ r.reason }}</td></tr>{% endfor %}</table>{% else %}<p>None.</p>{% endif %}
<h2>Similarity: clusters to review</h2>
{% if similarity is none %}<p>Not run (grader similarity, then --similarity DIR).</p>
{% elif clusters %}<p>No grade was changed. <a href="{{ similarity }}/similarity.html">Every pair</a>.</p>
<table><tr><th>cluster</th><th>submissions</th><th>pairs</th><th>best score</th></tr>
{% for c in clusters %}<tr><td><a href="{{ similarity }}/clusters/cluster-{{ c.number }}.html">{{ c.number }}</a></td>
<td>{{ c.names|join(", ") }}</td><td class="n">{{ c.pairs }}</td><td class="n">{{ "%.2f"|format(c.best) }}</td></tr>
{% endfor %}</table>{% else %}<p>No pair to review.</p>{% endif %}
<h2>Students</h2>
<table><tr><th>student</th><th>total</th>{% for key in keys %}<th>{{ key }}</th>{% endfor %}<th>status</th><th>late</th><th>flags</th></tr>
{% for r in records %}<tr><td><a href="#student-{{ r.student }}">{{ r.student }}</a></td><td class="n">{{ number(r.total) }}</td>
{% for score in r.problems %}<td class="n">{{ number(score) }}</td>{% endfor %}<td>{{ r.status }}</td>
<td>{{ r.late.note() if r.late and r.late.days else "" }}</td><td>{{ flags(r)|join(", ") }}</td></tr>{% endfor %}</table>
{% for r in records %}<section id="student-{{ r.student }}"><h3>{{ r.student }}</h3>
<pre>{{ feedback[r.student] }}</pre></section>{% endfor %}
</body></html>
"""


def _svg(figure) -> Markup:
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return Markup(text[text.index("<svg"):])


def _feedback(record: Record, folders: list[Path], changes: list[Change]) -> str:
    """What ``grader show --overrides`` prints for the student: their feedback, or why there is none."""
    if record.status == "missing":
        return f"No result: {record.reason}"
    for folder in folders:
        try:
            return student_view(read_results(find(folder, record.student))[0], changes, record.total, passed=False)[0]
        except GradebookError:
            continue
    return f"{record.status}: {record.reason or f'grader show OUT_DIR {record.student} prints it (two passes: each folder)'}"


def _explainer():
    """A known mistake's id to its explanation (and the handout section that explains it)."""
    from ...mistakes import load

    known = {m.id: m.misconception + (f" (handout: {m.section})" if m.section else "") for m in load()}
    return lambda mistake: known.get(mistake, "")


def _flagger(pairs: list[Review]):
    """A record's flags for the students' table: provisional, similar (to review), late, stubs left (a function
    not attempted), not in the roster, overridden."""
    similar = {name for pair in pairs for name in (pair.a, pair.b)}

    def flags(record: Record) -> list[str]:
        return [flag for flag, on in (("provisional", record.status == "graded" and record.provisional),
                                      ("similar", record.student in similar),
                                      ("late", bool(record.late and record.late.days) or UNKNOWN in record.notes),
                                      ("stubs left", any(outcome(t) == "not_attempted" for t in record.tests)),
                                      ("not in roster", NOT_IN_ROSTER in record.notes),
                                      ("override", any(OVERRIDDEN in note for note in record.notes))) if on]
    return flags


def html(records: list[Record], folders: list[Path], pairs: list[Review], similarity: Path | None, out: Path,
         changes: Sequence[Change] = ()) -> str:
    """The page for ``records``, read from ``folders``, with the similarity ``pairs`` of folder ``similarity``
    and the overrides' ``changes`` (already in ``records``) in each student's feedback."""
    graded = [r for r in records if r.status == "graded"]
    judged = [r for r in records if r.tests]
    tally = tally_tests(judged)
    scores = totals(records)
    link = os.path.relpath(similarity, out.resolve().parent) if similarity else None
    environment = Environment(autoescape=True)
    return environment.from_string(TEMPLATE).render(
        count=counts(records), provisional=[r.student for r in graded if r.provisional], mean=statistics.fmean(scores) if scores else None,
        median=number(statistics.median(scores)) if scores else "", total=TOTAL_POINTS,
        histogram=_svg(histogram(records)), problems=_svg(problem_scores(records)),
        per_problem=problem_means(graded), failed=most_failed(tally),
        judged=len(judged), mistakes=known_mistakes(judged), explain=_explainer(),
        not_attempted=sum(any(outcome(t) == "not_attempted" for t in r.tests) for r in judged), unfinished=[r for r in records if r.status != "graded"],
        similarity=link, clusters=grouped(pairs), keys=list(PROBLEMS), records=records, number=number, flags=_flagger(pairs),
        feedback={r.student: _feedback(r, folders, [c for c in changes if c.student == r.student]) for r in records})
