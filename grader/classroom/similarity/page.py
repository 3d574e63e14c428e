"""``similarity.html``: one self-contained page (inline CSS, no script, nothing fetched).

A table of the best pairs, those to review first (the CSV has every pair), the first of them side
by side with the matching regions highlighted (copydetect's highlighting, the text escaped), and
the submissions that could not be read.
"""

from __future__ import annotations

from jinja2 import Environment
from markupsafe import Markup
from copydetect.utils import highlight_overlap

from .compare import Pair
from .documents import Document
from .pairs import Criteria

LISTED, SHOWN = 300, 50  # the best pairs in the table, and side by side, those to review first (the CSV has all)
CONTEXT = 6  # lines kept around each matching region

TEMPLATE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Similarity review</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: .25em .6em; text-align: left; }
tr.review { background: #fde2e2; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 1em; }
pre { background: #f7f7f7; padding: .6em; overflow-x: auto; font-size: 12px; }
mark { background: #ffd54f; }
</style></head><body>
<h1>Similarity review</h1>
<p>{{ count }} submissions{% if past %} and {{ past }} past submissions{% endif %} compared over their
<code>assignment/*.py</code>, the stubs left out. A pair is to review when its score (the larger share of one
side's own code found in the other) is at least {{ criteria.threshold }} and at least {{ criteria.min_lines }}
lines match: {{ flagged }} pairs. A prompt to look, never a grade. The table lists the {{ listed|length }} best
pairs, the first {{ shown }} side by side below; <code>similarity.csv</code> has every pair.</p>
<table><tr><th>a</th><th>b</th><th>score</th><th>a in b</th><th>b in a</th><th>lines</th><th>to review</th></tr>
{% for p in listed %}<tr{% if p.flag %} class="review"{% endif %}><td>{{ p.pair.a }}</td><td>{{ p.pair.b }}</td>
<td>{% if p.shown %}<a href="#pair-{{ loop.index }}">{{ "%.2f"|format(p.pair.score) }}</a>{% else %}{{ "%.2f"|format(p.pair.score) }}{% endif %}</td>
<td>{{ "%.2f"|format(p.pair.a_in_b) }}</td><td>{{ "%.2f"|format(p.pair.b_in_a) }}</td><td>{{ p.pair.lines }}</td>
<td>{{ "yes" if p.flag else "" }}</td></tr>
{% endfor %}</table>
{% if unreadable %}<h2>Not compared (could not be read)</h2><ul>
{% for name, reason in unreadable.items() %}<li>{{ name }}: {{ reason }}</li>{% endfor %}</ul>{% endif %}
{% for p in listed %}{% if p.shown %}
<h2 id="pair-{{ loop.index }}">{{ p.pair.a }} and {{ p.pair.b }}: score {{ "%.2f"|format(p.pair.score) }},
{{ p.pair.lines }} lines</h2>
<div class="pair"><div><h3>{{ p.pair.a }}</h3><pre>{{ p.left }}</pre></div>
<div><h3>{{ p.pair.b }}</h3><pre>{{ p.right }}</pre></div></div>
{% endif %}{% endfor %}
</body></html>
"""


def _highlighted(text: str, slices) -> Markup:
    if not len(slices[0]):
        return Markup("")
    return Markup(highlight_overlap(text, slices, "<mark>", "</mark>", truncate=CONTEXT, escape_html=True)[0])


def html(pairs: list[Pair], documents: list[Document], past: int, unreadable: dict[str, str],
         criteria: Criteria) -> str:
    """The page of ``pairs`` (best first) over ``documents`` (``past`` of them from earlier terms)."""
    texts = {d.name: d.text for d in documents}
    flagged = [p for p in pairs if criteria.flags(p)]
    ranked = (flagged + [p for p in pairs if p.lines and not criteria.flags(p)])[:LISTED]
    listed = [dict(pair=pair, flag=index < len(flagged), shown=index < SHOWN) for index, pair in enumerate(ranked)]
    for item in listed:
        if item["shown"]:
            item["left"], item["right"] = (_highlighted(texts[item["pair"].a], item["pair"].slices[0]),
                                           _highlighted(texts[item["pair"].b], item["pair"].slices[1]))
    environment = Environment(autoescape=True)
    return environment.from_string(TEMPLATE).render(
        count=len(documents) - past, past=past, criteria=criteria, listed=listed, unreadable=unreadable,
        flagged=len(flagged), shown=min(SHOWN, len(listed)))
