"""The attack check: every hostile submission gains nothing, and the grader survives it.

Each attack (and each control it is compared with, see ``grader/selfproof/hostile/__init__.py``) is graded
by the real command, ``grader grade SUBMISSION --out results/results.json``, on its own problem
with the ``ci`` profile, from a folder laid out like an autograder's (the submission, a results
folder, canary files). One row per attack then states these facts, and the check fails when
any row does not hold:

- points: the score is at most the reference's, and every test's outcome is the control's;
- time: grading ends within the attack's time budget plus ``SLACK_SECONDS``;
- processes: no process of the submission is left once grading is over (its marker, its
  working folder, a dedicated worker uid, or an orphan re-parented to this check);
- files: nothing changed in the kit, the submission's folder and its parents, ``$HOME``, the
  top of the temporary folders or ``/autograder`` (if present);
- results: results.json is the judge's (well-formed, self-consistent, unchanged afterwards);
- leaks: no line of a hidden suite, probe or solution region appears in results.json unless
  the control's results show it too;
- network: nothing reached a listener on the host's loopback.

``quick`` runs the attacks marked ``quick = true`` in attacks.toml (exit at import, patched
comparisons, a lying tuple, leaking the kit, an infinite loop, detached processes, sleeping
under the limit, forged results, writing home and parent folders, files beside the package):
about three minutes on two cores.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ...grading import judges
from ...grading.grade import hidden_suites
from ...paths import HIDDEN, KIT_ROOT
from ...problems import PROBLEMS
from ...release.assert_no_leak import secret_lines
from ...grading.results import kit_data
from . import Attack, defaults, load, materialize, materialize_control, reference
from .facts import Row, leak_fact, points_fact, results_fact
from .grading import SLACK_SECONDS, Graded, digest, grade, layout
from .listener import Listener
from .processes import Reaper, kill_left_behind, left_behind
from .watch import attack_watch

console = Console(width=None if sys.stdout.isatty() else 170)


def _check_attack(attack: Attack, run_root: Path, siblings: set[str], controls: dict, secrets_: set[str],
                  reaper: Reaper, warm: bool) -> Row:
    row = Row(attack)
    grading = run_root / attack.id
    marker = f"kit-hostile-{attack.id}-{secrets.token_hex(4)}"
    listener = Listener(marker)
    try:
        submission, out = layout(grading)
        values = {"MARKER": marker, "PORT": str(listener.port), "CALL_SECONDS": str(attack.options["call_seconds"])}
        materialize(attack, submission, values)
        watch = attack_watch(grading, run_root, siblings, marker)
        watch.start()
        graded = grade(grading, submission, out, attack.graded, attack.options, reaper, warm)
        tags = [marker, str(grading)]
        deadline = time.monotonic() + 10
        while (left := left_behind(tags)) and time.monotonic() < deadline:
            time.sleep(0.5)
        left += reaper.orphans()
        kill_left_behind(tags)
        time.sleep(1)
        control, plain = controls[attack.control], controls[reference(attack.graded)]
        limit = float(attack.options["budget_seconds"]) + SLACK_SECONDS
        row.facts["points"] = points_fact(attack, graded, control, plain)
        row.facts["time"] = (graded.returncode is not None and graded.seconds <= limit, f"{graded.seconds:.0f} s")
        row.facts["processes"] = (not left, "none left" if not left else f"{len(left)} left: {left[0]}")
        changed = watch.changes()
        row.facts["files"] = (not changed, "unchanged" if not changed else f"{len(changed)}: {', '.join(changed[:3])}")
        row.facts["results"] = results_fact(graded, digest(out), control)
        row.facts["leaks"] = leak_fact(graded, control.text + plain.text, secrets_)
        contacted = listener.contacted()
        row.facts["network"] = (not contacted, "unreached" if not contacted else f"reached by {', '.join(contacted)}")
        row.isolation = dict(kit_data(graded.data or {}).get("isolation", {}))
    except Exception as exc:  # noqa: BLE001 - a broken check is a failed row, not a crash of the table
        row.facts["check"] = (False, f"{type(exc).__name__}: {exc}")
    finally:
        listener.close()
    return row


def _grade_control(key: tuple[str, str, str, str], run_root: Path, options: dict, reaper: Reaper,
                   warm: bool) -> Graded:
    kind, module, function, problems = key
    grading = run_root / "-".join(filter(None, ("control", kind, problems.replace(",", "+"), module, function)))
    submission, out = layout(grading)
    materialize_control(kind, module, function, submission)
    return grade(grading, submission, out, problems, options, reaper, warm)


def _table(rows: list[Row]) -> Table:
    columns = ["points", "time", "processes", "files", "results", "leaks", "network"]
    table = Table(title=f"hostile submissions: {sum(r.ok for r in rows)} of {len(rows)} contained, nothing gained",
                  show_lines=False)
    table.add_column("attack")
    table.add_column("P")
    table.add_column("expected")
    table.add_column("score (ref)", justify="right")
    for name in columns[1:]:
        table.add_column(name)
    table.add_column("verdict")
    for row in rows:
        cells = []
        for name in columns:
            ok, text = row.facts.get(name, (False, "-"))
            cells.append(text if ok else f"[red]{text[:60]}[/]")
        verdict = "[green]holds[/]" if row.ok else "[red]FAILS[/]"
        table.add_row(row.attack.id, row.attack.problem, row.attack.expect, *cells, verdict)
    return table


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


def main(*, quick: bool = False, attacks: list[str] | None = None, jobs: int = 2, gpu: bool = False,
         warm: bool = False) -> int:
    """Grade each selected attack (all, the quick subset, those named, or with ``gpu`` the attacks on GPU
    tests alone) and print one row each; 0 when all hold. Attacks on GPU tests run only where CUDA does.
    ``warm``: graded as a batch grades (judges and workers forked from warm ones), not as one grading."""
    catalog = [a for a in load() if (not attacks or a.id in attacks) and (not quick or a.quick or attacks)
               and (a.gpu or not gpu)]
    if any(a.gpu for a in catalog) and not _cuda():
        console.print(f"[yellow]not run: needs a GPU[/] {', '.join(a.id for a in catalog if a.gpu)}")
        if gpu:
            return 2
        catalog = [a for a in catalog if not a.gpu]
    present = {key for key in PROBLEMS if hidden_suites([key], HIDDEN)}
    skipped = [a for a in catalog if a.problem not in present]
    catalog = [a for a in catalog if a.problem in present]
    for attack in skipped:
        console.print(f"[yellow]skipped[/] {attack.id}: no hidden suite for {attack.problem} yet")
    if not catalog:
        console.print("[red]no attack to run[/]")
        return 1
    options = defaults()
    started = time.monotonic()
    run_root = Path(tempfile.mkdtemp(prefix="kit-hostile-"))
    reaper = Reaper()
    secrets_ = secret_lines(KIT_ROOT)
    try:
        with judges.warm() if warm else contextlib.nullcontext():  # a batch's gradings share them
            reaper.tracked |= judges.warm_processes()  # this check's own children, not an attack's
            keys = sorted({a.control for a in catalog} | {reference(a.graded) for a in catalog})
            with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                graded = list(pool.map(lambda key: _grade_control(key, run_root, options, reaper, warm), keys))
            controls = dict(zip(keys, graded))
            broken = [f"{'/'.join(filter(None, key))}: {g.stderr[-300:] or 'no results'}" for key, g in controls.items()
                      if g.data is None]
            for line in broken:
                console.print(f"[red]control failed to grade[/]: {line}")
            siblings = {a.id for a in catalog} | {p.name for p in run_root.iterdir()}
            with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                rows = list(pool.map(lambda a: _check_attack(a, run_root, siblings, controls, secrets_, reaper, warm),
                                     catalog))
    finally:
        reaper.close()
        shutil.rmtree(run_root, ignore_errors=True)
    console.print(_table(rows))
    for row in rows:
        for name, (ok, text) in row.facts.items():
            if not ok:
                console.print(f"[red]{row.attack.id}[/] {name}: {text}")
    isolation = next((r.isolation for r in rows if r.isolation), {})
    if isolation:
        console.print("isolation: " + "; ".join(f"{k}: {v}" for k, v in isolation.items()))
    console.print(f"{len(rows)} attacks in {time.monotonic() - started:.0f} s"
                  + (f"; {len(skipped)} skipped (no hidden suite)" if skipped else ""))
    return 0 if rows and all(r.ok for r in rows) and not broken else 1
