"""Render ``docs/benchmarks.md`` from the bench records: the latest figures per claim, each with the
command that measured them, then every record as one row of a history table::

    python -m grader.bench.render                       # docs/benchmarks/records/ -> docs/benchmarks.md
    python -m grader.bench.render --records DIR --out FILE
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader.bench.records import RECORDS, load

BENCHMARKS = RECORDS.parents[1] / "benchmarks.md"
HEADER = """# Benchmarks

Rendered by `python -m grader.bench.render` from the records in `docs/benchmarks/records/`, which
every bench in `grader/bench/` writes as it ends; do not edit this page by hand. A speed claim is a
ratio of two sides measured in one run on one machine, never an absolute figure from another machine.
"""


def _value(value: object) -> str:
    if value is None:
        return "not recorded"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _figures(figures: dict) -> str:
    return "; ".join(f"{name} {_value(value)}" for name, value in figures.items())


def _where(record: dict) -> str:
    cpu = record["cpu"]
    where = (f"`{record['commit']}`, {record['date']}, {cpu.get('count', '?')} x {cpu.get('model', '?')}, "
             f"load {_value(record['load_at_start'])} at the start")
    imported = record.get("imported")
    return where + (f"; imported from {imported}" if imported else "")


def _table(what: str, table: dict) -> list[str]:
    """A record's ``sides`` or ``rows`` as a markdown table: one row each, one column per figure."""
    names = list(dict.fromkeys(name for figures in table.values() for name in figures))
    lines = [f"| {what} | {' | '.join(names)} |", f"|---|{'---|' * len(names)}"]
    lines += [f"| {row} | {' | '.join(_value(figures.get(name, '')) for name in names)} |"
              for row, figures in table.items()]
    return [*lines, ""]


def render(records: list[dict]) -> str:
    """The page for ``records`` (oldest first): the latest record of each claim, then the history."""
    latest = {record["claim"]: record for record in records}
    lines = [HEADER, "## Latest figures", ""]
    for claim, record in sorted(latest.items()):
        lines += [f"### {claim}", "", f"    {record['command']}", "", _figures(record["figures"]) + ".", ""]
        lines += _table("side", record["sides"]) if record.get("sides") else []
        lines += _table("", record["rows"]) if record.get("rows") else []
        lines += [f"Measured at {_where(record)}.", ""]
    lines += ["## History", "", "| date | claim | figures | commit | CPU | load |", "|---|---|---|---|---|---|"]
    for record in reversed(records):
        cpu = record["cpu"]
        figures = _figures(record["figures"]).replace("|", "/")
        lines.append(f"| {record['date']} | {record['claim']} | {figures} | `{record['commit']}`"
                     f"{' (imported)' if record.get('imported') else ''} | {cpu.get('count', '?')} x "
                     f"{cpu.get('model', '?')} | {_value(record['load_at_start'])} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.bench.render", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=Path, default=RECORDS, help="the records folder")
    parser.add_argument("--out", type=Path, default=BENCHMARKS, help="the page written")
    args = parser.parse_args(argv)
    if not args.records.is_dir():
        print(f"render: {args.records}: no such folder", file=sys.stderr)
        return 2
    try:
        page = render(load(args.records))
    except ValueError as exc:
        print(f"render: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(page, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
