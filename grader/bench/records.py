"""Bench records: every bench run leaves one JSON record, and ``docs/benchmarks.md`` is rendered from them.

A record says what was run and where: the command, the kit's commit, the date (UTC), the CPU model and
count, the load average when the run started, its figures, and for a side-by-side run each side's
figures. ``start`` is called as a bench begins (it reads the load before the bench adds to it) and
``Run.write`` as it ends. Records go to ``docs/benchmarks/records/``, or to ``KIT_BENCH_RECORDS``
where that is set (the kit's tests set it). A record imported from an earlier write-up carries
``imported``: where its figures were stated (its ``commit`` and ``date`` are those of the measurement, or of
the write-up where the measurement's own were not stated), and may lack the load (``null``).

Shell scripts write theirs through the command line::

    python -m grader.bench.records --bench gpu_runner --claim "..." --load 0.4 steps_passed=6 seconds=359
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from grader.paths import KIT_ROOT

VERSION = 1
RECORDS = KIT_ROOT / "docs" / "benchmarks" / "records"
Figures = dict[str, "float | int | str"]
REQUIRED = {"version": int, "bench": str, "claim": str, "command": str, "commit": str, "date": str,
            "cpu": dict, "load_at_start": (int, float), "figures": dict}


def folder() -> Path:
    """Where records are written: ``KIT_BENCH_RECORDS``, else the kit's records folder."""
    return Path(os.environ.get("KIT_BENCH_RECORDS") or RECORDS)


def commit() -> str:
    """The kit's commit, with ``-dirty`` when its tracked files differ from it; ``unknown`` outside git."""
    run = subprocess.run(["git", "-C", str(KIT_ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
                         capture_output=True, text=True)
    return run.stdout.strip() if run.returncode == 0 else "unknown"


def cpu() -> dict[str, str | int]:
    """This machine's CPU model (``/proc/cpuinfo``) and count."""
    model = "unknown"
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        model = next(line.split(":", 1)[1].strip() for line in lines if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return {"model": model, "count": os.cpu_count() or 0}


@dataclass(frozen=True)
class Run:
    """A bench run under way: its name, command line and the load average when it began."""

    bench: str
    command: str
    load_at_start: float
    date: str = field(default_factory=lambda: datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))

    def record(self, claim: str, figures: Figures, sides: dict[str, Figures] | None = None,
               rows: dict[str, Figures] | None = None) -> dict:
        """The record of this run: ``figures`` answer ``claim``; ``sides`` are each side's of a side-by-side
        run, ``rows`` a breakdown (per problem, per case)."""
        record = {"version": VERSION, "bench": self.bench, "claim": claim, "command": self.command,
                  "commit": commit(), "date": self.date, "cpu": cpu(), "load_at_start": self.load_at_start,
                  "figures": figures}
        return record | ({"sides": sides} if sides else {}) | ({"rows": rows} if rows else {})

    def write(self, claim: str, figures: Figures, sides: dict[str, Figures] | None = None,
              rows: dict[str, Figures] | None = None) -> Path:
        """Write this run's record into the records folder and say where."""
        path = save(self.record(claim, figures, sides, rows))
        print(f"record: {path}")
        return path


def start(bench: str, argv: list[str] | None = None) -> Run:
    """A run of ``python -m grader.bench.<bench>`` with ``argv`` (this process's arguments by default)."""
    args = sys.argv[1:] if argv is None else argv
    return Run(bench, " ".join(["python", "-m", f"grader.bench.{bench}", *args]), round(os.getloadavg()[0], 2))


def check(record: object, where: str) -> dict:
    """``record`` if it is a record of this version, else ValueError with a one-line reason."""
    if not isinstance(record, dict):
        raise ValueError(f"{where}: not a JSON object")
    for key, kind in REQUIRED.items():
        if key == "load_at_start" and record.get("imported") and record.get(key) is None:
            continue
        if not isinstance(record.get(key), kind):
            raise ValueError(f"{where}: '{key}' missing or not {getattr(kind, '__name__', 'a number')}")
    if record["version"] != VERSION:
        raise ValueError(f"{where}: version {record['version']}, this kit reads {VERSION}")
    return record


def save(record: dict, into: Path | None = None) -> Path:
    """Write ``record`` as ``<date>-<bench>.json`` (a new name if taken) into ``into`` or ``folder()``."""
    check(record, record.get("bench", "record"))
    target = into or folder()
    target.mkdir(parents=True, exist_ok=True)
    stem = f"{record['date'].replace(':', '').replace('-', '')}-{record['bench']}"
    for number in range(1000):
        path = target / f"{stem}{f'-{number}' if number else ''}.json"
        try:
            with path.open("x", encoding="utf-8") as out:
                out.write(json.dumps(record, indent=1) + "\n")
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"{target}: too many records named {stem}")


def load(into: Path | None = None) -> list[dict]:
    """Every record of ``into`` (or ``folder()``), checked, oldest first."""
    records = []
    for path in sorted((into or folder()).glob("*.json")):
        try:
            records.append(check(json.loads(path.read_text(encoding="utf-8")), path.name))
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path.name}: not JSON ({exc.msg}, line {exc.lineno})") from None
    return sorted(records, key=lambda record: record["date"])


def _figure(text: str) -> tuple[str, float | int | str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r}: a figure is NAME=VALUE")
    for kind in (int, float):
        try:
            return name, kind(value)
        except ValueError:
            pass
    return name, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.bench.records", description=__doc__.splitlines()[0])
    parser.add_argument("--bench", required=True, help="the bench that ran (a script's name)")
    parser.add_argument("--claim", required=True, help="the question its figures answer")
    parser.add_argument("--command", help="the command that ran (default: the bench's name)")
    parser.add_argument("--load", type=float, required=True, help="the load average when it started")
    parser.add_argument("figures", nargs="+", type=_figure, metavar="NAME=VALUE")
    args = parser.parse_args(argv)
    Run(args.bench, args.command or args.bench, args.load).write(args.claim, dict(args.figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
