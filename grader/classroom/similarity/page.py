"""``similarity.html`` and one ``clusters/cluster-N.html`` per cluster: self-contained pages (inline CSS,
no script, nothing fetched) that fit a 1,400 px screen.

The main page holds the clusters (each a link to its own page, opened on demand) and a table of the
best pairs, those to review first (the CSV has every pair). A cluster's page shows, side by side with
the matching regions highlighted (copydetect's highlighting, the text escaped), the pairs that join its
members, best first: one pair fewer than it has members, however many pairs it holds.
"""

from __future__ import annotations

import statistics

from jinja2 import Environment
from markupsafe import Markup
from copydetect.utils import highlight_overlap

from .clusters import clusters
from .compare import Pair
from .documents import Document
from .pairs import Criteria

LISTED = 300  # the best pairs in the main page's table, those to review first (the CSV has all)
CONTEXT = 6  # lines kept around each matching region
SHOWN_LINES = 250  # of each side of a pair: a cluster's page stays small
FOLDER = "clusters"

STYLE = """<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; max-width: 1360px; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: .25em .6em; text-align: left; }
tr.review { background: #fde2e2; }
.pair { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: 1em; }
pre { background: #f7f7f7; padding: .6em; font-size: 12px; white-space: pre-wrap; overflow-wrap: anywhere; }
mark { background: #ffd54f; }
</style>"""

MAIN = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Similarity review</title>
{{ style }}</head><body>
<h1>Similarity review</h1>
<p>{{ count }} submissions{% if past %} and {{ past }} past submissions{% endif %} compared over their
<code>assignment/*.py</code>, the stubs left out. How alike honest work of this handout is comes from the class
itself: the median pair scores {{ "%.2f"|format(median) }}. A pair is to review when its score (the larger
share of one side's own code found in the other) stands {{ criteria.margin }} above the median of the other
pairs, is at least {{ criteria.threshold }}, and at least {{ criteria.min_lines }} lines match: {{ flagged }}
pairs in {{ groups|length }} clusters. A prompt to look, never a grade. <code>similarity.csv</code> has every
pair.</p>
<h2>Clusters to review</h2>
{% if groups %}<table><tr><th>cluster</th><th>submissions</th><th>best score</th><th>side by side</th></tr>
{% for g in groups %}<tr><td>{{ loop.index }}</td><td>{{ g.names|join(", ") }}</td><td>{{ "%.2f"|format(g.best) }}</td>
<td><a href="{{ folder }}/cluster-{{ loop.index }}.html">cluster {{ loop.index }}</a></td></tr>
{% endfor %}</table>{% else %}<p>None.</p>{% endif %}
<h2>The best pairs</h2>
<table><tr><th>a</th><th>b</th><th>score</th><th>a in b</th><th>b in a</th><th>lines</th><th>cluster</th></tr>
{% for p, number in listed %}<tr{% if number %} class="review"{% endif %}><td>{{ p.a }}</td><td>{{ p.b }}</td>
<td>{{ "%.2f"|format(p.score) }}</td><td>{{ "%.2f"|format(p.a_in_b) }}</td><td>{{ "%.2f"|format(p.b_in_a) }}</td>
<td>{{ p.lines }}</td><td>{% if number %}<a href="{{ folder }}/cluster-{{ number }}.html">{{ number }}</a>{% endif %}</td></tr>
{% endfor %}</table>
{% if unreadable %}<h2>Not compared (could not be read)</h2><ul>
{% for name, reason in unreadable.items() %}<li>{{ name }}: {{ reason }}</li>{% endfor %}</ul>{% endif %}
</body></html>
"""

CLUSTER = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Cluster {{ number }}</title>
{{ style }}</head><body>
<p><a href="../similarity.html">Similarity review</a></p>
<h1>Cluster {{ number }}: {{ names|join(", ") }}</h1>
<p>The pairs that join them, best first ({{ shown|length }} of the cluster's {{ total }} pairs to review).</p>
{% for p in shown %}<h2>{{ p.pair.a }} and {{ p.pair.b }}: score {{ "%.2f"|format(p.pair.score) }}, {{ p.pair.lines }} lines</h2>
<div class="pair"><div><h3>{{ p.pair.a }}</h3><pre>{{ p.left }}</pre></div>
<div><h3>{{ p.pair.b }}</h3><pre>{{ p.right }}</pre></div></div>
{% endfor %}</body></html>
"""


def _highlighted(text: str, slices) -> Markup:
    """The matching regions of ``text`` marked, with ``CONTEXT`` lines around them, at most ``SHOWN_LINES``."""
    if not len(slices[0]):
        return Markup("")
    lines = highlight_overlap(text, slices, "<mark>", "</mark>", truncate=CONTEXT, escape_html=True)[0].splitlines()
    kept = "\n".join(lines[:SHOWN_LINES])
    if len(lines) > SHOWN_LINES:
        kept += "</mark>" * (kept.count("<mark>") - kept.count("</mark>"))
        kept += f"\n... {len(lines) - SHOWN_LINES} more lines"
    return Markup(kept)


def _joining(pairs: list[Pair]) -> list[Pair]:
    """The best pairs (``pairs`` come best first) that each join one more member: a spanning tree."""
    kept: list[Pair] = []
    for pair in pairs:
        if not any(pair.a in group and pair.b in group for group in clusters((p.a, p.b) for p in kept)):
            kept.append(pair)
    return kept


def pages(pairs: list[Pair], documents: list[Document], past: int, unreadable: dict[str, str],
          criteria: Criteria) -> dict[str, str]:
    """The pages by file name (``similarity.html``, ``clusters/cluster-N.html``) for ``pairs`` (best first) over
    ``documents`` (``past`` of them from earlier terms), ``criteria`` calibrated to the class."""
    texts = {d.name: d.text for d in documents}
    flagged = [p for p in pairs if criteria.flags(p)]
    groups = criteria.clusters(pairs)
    numbers = {name: index for index, group in enumerate(groups, 1) for name in group}
    ranked = (flagged + [p for p in pairs if p.lines and not criteria.flags(p)])[:LISTED]
    environment = Environment(autoescape=True)
    summary = [{"names": g, "best": max(p.score for p in flagged if numbers[p.a] == index)}
               for index, g in enumerate(groups, 1)]
    found = {"similarity.html": environment.from_string(MAIN).render(
        style=Markup(STYLE), count=len(documents) - past, past=past, criteria=criteria,
        median=statistics.median(criteria.scores) if criteria.scores else 0.0, flagged=len(flagged), groups=summary,
        listed=[(p, numbers[p.a] if criteria.flags(p) else None) for p in ranked], unreadable=unreadable,
        folder=FOLDER)}
    for index, group in enumerate(groups, 1):
        mine = [p for p in flagged if numbers[p.a] == index]
        shown = [dict(pair=p, left=_highlighted(texts[p.a], p.slices[0]), right=_highlighted(texts[p.b], p.slices[1]))
                 for p in _joining(mine)]
        found[f"{FOLDER}/cluster-{index}.html"] = environment.from_string(CLUSTER).render(
            style=Markup(STYLE), number=index, names=group, shown=shown, total=len(mine))
    return found
