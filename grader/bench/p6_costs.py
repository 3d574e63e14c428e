"""What sampling a big token file costs, as P6's hidden suite measures it from outside the worker.

Starts a sandboxed worker for the reference and one for each named mutant or attack (default:
the whole-file reader ``p6-reads-whole-memmap`` and the walker through small mappings
``p6-walks-the-file-through-small-mappings``), runs the suite's measurement on each
(load_tokens, then get_batch on a sparse token file; peak memory, bytes read and page faults of
the worker's whole process tree, from outside it: ``Submission.measure``) and prints the figures,
the MiB the suite charges (the most of the three, faults counted at ``MIB_PER_FAULT``) and their
ratio to the reference's, in this one run:

    python -m grader.bench.p6_costs
    python -m grader.bench.p6_costs --mib 512 p6-reads-whole-memmap p6-load-reads-file
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from grader import mistakes
from grader.bench import records
from grader.selfproof import hostile
from grader.judge.drivers import data
from grader.containment.limits import Limits
from grader.containment.worker import Worker
from grader.judge.handle import Submission
from grader.submission import stage

DEFAULT = ["p6-reads-whole-memmap", "p6-walks-the-file-through-small-mappings"]


def costs(package: Path, size: int) -> tuple[data.Cost, data.Cost]:
    """(what load_tokens cost, what 2 x get_batch(8, 256) cost) for the submission in ``package``."""
    backend = Worker(package, Limits())
    try:
        sub = Submission(backend, package)
        data.warm_up(sub)
        _, load = data.load_cost(sub, size)
        _, batch = data.batch_cost(sub, size, calls=2, batch_size=8, context_length=256)
        return load, batch
    finally:
        backend.close()


def package_of(name: str, dest: Path) -> Path:
    """The reference, or the reference with the named mutant or attack, written under ``dest``."""
    if name == "reference":
        return stage(mistakes.SOLUTIONS, dest)
    mutant = {m.id: m for m in mistakes.load()}.get(name)
    if mutant is not None:
        return mistakes.materialize(mutant, dest)
    attack = {a.id: a for a in hostile.load()}.get(name)
    if attack is None:
        raise SystemExit(f"no mutant or attack named {name}")
    return hostile.materialize(attack, dest, {"MARKER": "p6costs"}) / "assignment"


def row(name: str, cost: data.Cost, base: data.Cost) -> str:
    return (f"{name:42s} peak {cost.peak_mib:7.1f}  written {cost.written_mib:7.1f}  read {cost.read_mib:7.1f}  "
            f"faults {cost.faults:6d} (<= {cost.mapped_mib:7.1f} MiB)  cached {cost.cached_mib:7.1f}  charged {cost.touched_mib:7.1f} ({cost.touched_mib / max(base.touched_mib, 0.1):5.1f}x)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m grader.bench.p6_costs", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=DEFAULT, help="mutant or attack ids to compare")
    parser.add_argument("--mib", type=int, default=256, help="size of the sparse token file")
    args = parser.parse_args(argv)
    run = records.start("p6_costs", argv)
    with tempfile.TemporaryDirectory() as tmp:
        names = ["reference", *(name for name in args.names if name != "reference")]
        rows = [(name, costs(package_of(name, Path(tmp) / name), args.mib << 20)) for name in names]
    print(f"{args.mib} MiB sparse token file; MiB (faults: at most {data.MIB_PER_FAULT} MiB each); "
          f"the suite fails a cost of {args.mib / 2:.0f} MiB or more; measured by {rows[0][1][1].source}:")
    for step, index in (("load_tokens", 0), ("2 x get_batch", 1)):
        print(step)
        for name, pair in rows:
            print("  " + row(name, pair[index], rows[0][1][index]))
    charged = {f"{name}, {step}": {"charged MiB": round(pair[index].touched_mib, 1), "x the reference": round(
        pair[index].touched_mib / max(rows[0][1][index].touched_mib, 0.1), 1)}
        for name, pair in rows for step, index in (("load_tokens", 0), ("2 x get_batch", 1))}
    run.write(f"what P6's suite charges for sampling a {args.mib} MiB token file", {"fails at MiB": args.mib / 2},
              rows=charged)


if __name__ == "__main__":
    main()
