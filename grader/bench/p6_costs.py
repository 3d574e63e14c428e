"""What sampling a big token file costs, as P6's hidden suite measures it from outside the worker.

Starts a sandboxed worker for the reference and one for each named mutant (default: the
whole-file reader ``p6-reads-whole-memmap``), runs the suite's measurement on each (load_tokens,
then get_batch on a sparse token file; peak memory and bytes read of the worker's whole process
tree, from outside it: ``Submission.measure``) and prints the figures and their ratio to the reference's, in this one run:

    python -m grader.bench.p6_costs
    python -m grader.bench.p6_costs --mib 512 p6-reads-whole-memmap p6-load-reads-file
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from grader.selfproof import mutants
from grader.judge.drivers import data
from grader.containment.limits import Limits
from grader.containment.worker import Worker
from grader.judge.handle import Submission
from grader.grading.submission import stage


def costs(package: Path, size: int) -> tuple[float, float]:
    """(MiB touched by load_tokens, MiB touched by 2 x get_batch(8, 256)) for the submission in ``package``."""
    backend = Worker(package, Limits(call_seconds=120))
    try:
        sub = Submission(backend, package)
        data.warm_up(sub)
        _, load = data.load_cost(sub, size)
        _, batch = data.batch_cost(sub, size, calls=2, batch_size=8, context_length=256)
        return load.touched_mib, batch.touched_mib
    finally:
        backend.close()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m grader.bench.p6_costs", description=__doc__.splitlines()[0])
    parser.add_argument("mutants", nargs="*", default=["p6-reads-whole-memmap"], help="mutant ids to compare")
    parser.add_argument("--mib", type=int, default=256, help="size of the sparse token file")
    args = parser.parse_args()
    chosen = {m.id: m for m in mutants.load() if m.id in args.mutants}
    with tempfile.TemporaryDirectory() as tmp:
        rows = [("reference", costs(stage(mutants.SOLUTIONS, Path(tmp) / "reference"), args.mib << 20))]
        rows += [(name, costs(mutants.materialize(chosen[name], Path(tmp) / name), args.mib << 20))
                 for name in args.mutants]
    base = rows[0][1]
    print(f"{args.mib} MiB sparse token file; MiB touched (max of peak memory growth and bytes read):")
    for name, (load, batch) in rows:
        print(f"  {name:28s} load_tokens {load:8.1f} ({load / max(base[0], 0.1):6.1f}x)   "
              f"2 x get_batch {batch:8.1f} ({batch / max(base[1], 0.1):6.1f}x)")


if __name__ == "__main__":
    main()
