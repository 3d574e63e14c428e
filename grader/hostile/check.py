"""The attack check: every hostile submission gains nothing, and the grader survives it.

Each attack (and each control it is compared with, see ``grader/hostile/__init__.py``) is graded
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

import ctypes
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..grade import hidden_suites
from ..paths import HIDDEN, KIT_ROOT
from ..problems import PROBLEMS
from ..release.assert_no_leak import secret_lines
from ..results import GradingResult, TestResult, kit_data
from ..sandbox import UID_BASE, UID_SPAN
from . import Attack, defaults, load, materialize, materialize_control, reference

SLACK_SECONDS = 180
PR_SET_CHILD_SUBREAPER = 36
SCRATCH_NAME = re.compile(r"^(tmp[\w-]{8}|pytest-of-[\w.-]+|kit-(judge|worker|hostile|mutant|selfcheck)-[\w-]+)$")
console = Console(width=None if sys.stdout.isatty() else 170)


# -- what the file system looks like ------------------------------------------------------------

def _scan(root: Path, depth: int | None, skip: frozenset[str] = frozenset()) -> dict[str, tuple]:
    """path -> (kind, size, mtime, mode, uid) of everything under ``root`` (to ``depth`` levels)."""
    found: dict[str, tuple] = {}

    def visit(folder: Path, level: int) -> None:
        try:
            entries = list(os.scandir(folder))
        except OSError:
            return
        for entry in entries:
            if entry.name in skip or entry.path in skip:
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if entry.is_symlink():
                found[entry.path] = ("link", os.readlink(entry.path))
            elif entry.is_dir(follow_symlinks=False):
                found[entry.path] = ("dir", info.st_mode, info.st_uid)
                if depth is None or level < depth:
                    visit(Path(entry.path), level + 1)
            else:
                found[entry.path] = ("file", info.st_size, info.st_mtime_ns, info.st_mode, info.st_uid)

    if root.exists():
        found[str(root)] = ("root",)
        visit(root, 1)
    return found


def _uid_of(entry: tuple | None) -> int | None:
    return entry[2] if entry and entry[0] == "dir" else entry[4] if entry and entry[0] == "file" else None


def _submissions(uid: int | None) -> bool:
    """Whether a file owned by ``uid`` could have been written by a worker (a dedicated uid, or,
    when grading unprivileged, this user: a shared folder's other files belong to other programs)."""
    return uid is not None and (UID_BASE <= uid < UID_BASE + UID_SPAN or (os.geteuid() != 0 and uid == os.geteuid()))


@dataclass
class Watch:
    """The places an attack must leave alone, and how closely each is looked at. In shared places
    (the temporary folders, $HOME, the root folder) only what a worker could own, or what carries
    the attack's marker, counts: other programs on the machine come and go there."""

    places: list[tuple[Path, int | None, frozenset[str]]]
    shared: tuple[str, ...]
    marker: str
    before: dict[str, tuple] = field(default_factory=dict)

    def take(self) -> dict[str, tuple]:
        snapshot: dict[str, tuple] = {}
        for root, depth, skip in self.places:
            snapshot.update(_scan(root, depth, skip))
        return snapshot

    def start(self) -> None:
        self.before = self.take()

    def changes(self) -> list[str]:
        after = self.take()
        found = []
        for path in sorted(set(self.before) | set(after)):
            old, new = self.before.get(path), after.get(path)
            if os.path.dirname(path) in self.shared and self.marker not in path and not (
                    _submissions(_uid_of(old)) or _submissions(_uid_of(new))) or (
                    os.path.dirname(path) in _TEMP_TOPS and SCRATCH_NAME.match(os.path.basename(path))):
                continue
            if old != new:
                what = "new" if old is None else "removed" if new is None else "changed"
                found.append(f"{path} ({what})")
        return found


_TEMP_TOPS = {os.path.realpath(p) for p in {tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"}}


def _watch(grading: Path, run_root: Path, siblings: set[str], marker: str) -> Watch:
    kit_skip = frozenset({"__pycache__", ".pytest_cache", ".git", ".mypy_cache", ".ruff_cache"})
    places: list[tuple[Path, int | None, frozenset[str]]] = [
        (KIT_ROOT, None, kit_skip),
        (grading, None, frozenset({str(grading / "tmp"), str(grading / "results" / "results.json")})),
        (run_root, 1, frozenset(siblings - {grading.name})),
        (Path.home(), 1, frozenset()), (Path("/autograder"), None, frozenset()),
    ]
    git = KIT_ROOT / ".git"
    if git.is_dir():  # its hooks and config (the history itself changes with every commit)
        places += [(git, 1, frozenset(p.name for p in git.iterdir() if p.name not in ("config", "hooks"))),
                   (git / "hooks", None, frozenset())]
    places += [(Path(top), 1, frozenset({str(run_root)})) for top in sorted(_TEMP_TOPS)]
    places += [(parent, 1, frozenset({str(run_root)})) for parent in run_root.parents if str(parent) not in _TEMP_TOPS]
    shared = (*_TEMP_TOPS, str(Path.home()), *(str(p) for p in run_root.parents))
    return Watch(places, shared, marker)


# -- processes ----------------------------------------------------------------------------------

def _processes() -> list[tuple[int, int, int, bytes]]:
    """(pid, parent pid, uid, command line) of every process."""
    table = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("State", "").strip().startswith("Z"):
            continue
        table.append((int(entry), int(fields["PPid"]), int(fields["Uid"].split()[0]), cmdline))
    return table


class Reaper:
    """Makes this process the subreaper of everything it starts, and finds (and reaps) escapees."""

    def __init__(self) -> None:
        self.tracked: set[int] = set()
        self.lock = threading.Lock()
        ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    def close(self) -> None:
        self.orphans()
        ctypes.CDLL(None).prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)

    def orphans(self) -> list[str]:
        """Children of this process that it did not start itself: killed, reaped and described."""
        me, found = os.getpid(), []
        with self.lock:
            tracked = set(self.tracked)
        for pid, ppid, _, cmdline in _processes():
            if ppid == me and pid not in tracked:
                found.append(f"{pid}: {cmdline[:100].decode(errors='replace')}")
                try:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                except (OSError, ChildProcessError):
                    pass
        return found


def _left_behind(tags: list[str]) -> list[str]:
    """Processes whose command line carries one of ``tags`` (the attack's marker; the grading's
    folder, which every worker's command line names, and its forks inherit)."""
    me = os.getpid()
    found = []
    for pid, _, uid, cmdline in _processes():
        text = cmdline.decode(errors="replace")
        if pid != me and any(tag in text for tag in tags):
            found.append(f"{pid} (uid {uid}): {text[:100]}")
    return found


def _kill_left_behind(tags: list[str]) -> None:
    for pid, _, _, cmdline in _processes():
        if pid != os.getpid() and any(tag in cmdline.decode(errors="replace") for tag in tags):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


# -- the network --------------------------------------------------------------------------------

class Listener:
    """A TCP and a UDP socket on the loopback (IPv4 and IPv6) and an abstract unix socket."""

    def __init__(self, marker: str) -> None:
        self.sockets: list[tuple[str, socket.socket]] = []
        tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        tcp.bind(("127.0.0.1", 0))
        self.port = tcp.getsockname()[1]
        self._add("tcp", tcp)
        for family, host, kind, name in ((socket.AF_INET, "127.0.0.1", socket.SOCK_DGRAM, "udp"),
                                         (socket.AF_INET6, "::1", socket.SOCK_STREAM, "tcp6"),
                                         (socket.AF_INET6, "::1", socket.SOCK_DGRAM, "udp6")):
            try:
                sock = socket.socket(family, kind)
                sock.bind((host, self.port))
                self._add(name, sock)
            except OSError:
                pass
        unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        unix.bind("\0" + marker)
        self._add("unix", unix)

    def _add(self, name: str, sock: socket.socket) -> None:
        if sock.type == socket.SOCK_STREAM:
            sock.listen(8)
        sock.setblocking(False)
        self.sockets.append((name, sock))

    def contacted(self) -> list[str]:
        found = []
        for name, sock in self.sockets:
            try:
                if sock.type == socket.SOCK_STREAM:
                    sock.accept()[0].close()
                else:
                    sock.recv(64)
                found.append(name)
            except (BlockingIOError, OSError):
                pass
        return found

    def close(self) -> None:
        for _, sock in self.sockets:
            sock.close()


# -- grading ------------------------------------------------------------------------------------

@dataclass
class Graded:
    """One run of ``grader grade``: what it wrote and how it ended."""

    returncode: int | None
    seconds: float
    data: dict | None
    text: str
    stderr: str
    digest: str

    @property
    def tests(self) -> tuple[TestResult, ...]:
        return GradingResult.from_gradescope_dict(self.data).tests if self.data else ()

    @property
    def statuses(self) -> dict[str, str]:
        return {t.nodeid: t.status for t in self.tests}

    @property
    def messages(self) -> list[str]:
        return [t.message for t in self.tests]

    @property
    def score(self) -> float:
        return float((self.data or {}).get("score", 0.0))


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ""


def _layout(grading: Path) -> tuple[Path, Path]:
    """An autograder-like folder: submission/, results/, canaries; returns (submission, results.json)."""
    for folder in (grading / "submission", grading / "results", grading / "tmp"):
        folder.mkdir(parents=True, exist_ok=True)
    for folder in (grading, grading / "submission", grading / "results"):
        (folder / "canary.txt").write_text("left here by the attack check; must survive grading\n")
    return grading / "submission", grading / "results" / "results.json"


def _grade(grading: Path, submission: Path, out: Path, problem: str, options: dict, reaper: Reaper) -> Graded:
    budget = float(options["budget_seconds"])
    command = [sys.executable, "-m", "grader", "grade", str(submission), "--out", str(out), "--problems", problem,
               "--profile", "ci", "--call-seconds", str(options["call_seconds"]), "--budget-seconds", str(budget),
               "--memory-mb", str(int(options["memory_mb"]))]
    env = {**os.environ, "TMPDIR": str(grading / "tmp"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(KIT_ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    with reaper.lock:
        process = subprocess.Popen(command, cwd=grading, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, start_new_session=True)
        reaper.tracked.add(process.pid)
    try:
        _, stderr = process.communicate(timeout=budget + SLACK_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
        process.returncode = None
    finally:
        with reaper.lock:
            reaper.tracked.discard(process.pid)
    seconds = time.monotonic() - started
    text = out.read_text(errors="replace") if out.is_file() else ""
    try:
        data = json.loads(text) if text else None
    except ValueError:
        data = None
    return Graded(process.returncode, seconds, data, text, stderr.decode(errors="replace")[-2000:], _digest(out))


# -- one row ------------------------------------------------------------------------------------

@dataclass
class Row:
    attack: Attack
    facts: dict[str, tuple[bool, str]] = field(default_factory=dict)
    isolation: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(ok for ok, _ in self.facts.values())


def _results_fact(graded: Graded, later_digest: str, control: Graded) -> tuple[bool, str]:
    data = graded.data
    if graded.returncode != 0 or data is None:
        return False, f"no results (exit {graded.returncode}): {graded.stderr[-300:]}"
    passed = round(sum(t.points for t in graded.tests if t.status == "passed"), 4)
    problems, kit = [], kit_data(data)
    if "kit_version" not in kit or kit.get("grader_error"):
        problems.append(f"not a completed grading ({kit.get('grader_error', 'no kit_version')})")
    if data.get("score") != passed:
        problems.append(f"score {data.get('score')} is not the {passed} points of its passed tests")
    if set(graded.statuses) != set(control.statuses):
        problems.append("its tests are not the hidden suite's")
    if later_digest != graded.digest:
        problems.append("changed after grading ended")
    return (not problems), "; ".join(problems) or "the judge's"


def _points_fact(attack: Attack, graded: Graded, control: Graded, reference: Graded) -> tuple[bool, str]:
    if graded.data is None:
        return False, "not graded"
    mine = graded.statuses
    expected = {n: "failed" if n.split("::")[-1] in attack.fails else s for n, s in control.statuses.items()}
    gained = sorted(n.split("::")[-1] for n in mine if mine[n] == "passed" and expected.get(n) != "passed")
    lost = sorted(n.split("::")[-1] for n in mine if mine[n] != "passed" and expected.get(n) == "passed")
    problems = []
    if graded.score > reference.score:
        problems.append(f"score {graded.score:g} above the reference's {reference.score:g}")
    if gained:
        problems.append(f"gained {', '.join(gained)}")
    if attack.expect == "budget":
        if not any("time budget" in m for m in graded.messages) or "time budget" not in graded.data.get("output", ""):
            problems.append("no time-budget note in the report")
    elif lost:
        problems.append(f"lost {', '.join(lost)}")
    summary = f"{graded.score:g} ({reference.score:g})"
    return (not problems), "; ".join(problems) or summary


def _leak_fact(graded: Graded, allowed: str, secrets_: set[str]) -> tuple[bool, str]:
    leaked = sorted(line for line in secrets_ if line in graded.text and line not in allowed)
    return (not leaked), (f"{len(leaked)} lines, e.g. {leaked[0][:80]!r}" if leaked else "none")


def _check_attack(attack: Attack, run_root: Path, siblings: set[str], controls: dict, secrets_: set[str],
                  reaper: Reaper) -> Row:
    row = Row(attack)
    grading = run_root / attack.id
    marker = f"kit-hostile-{attack.id}-{secrets.token_hex(4)}"
    listener = Listener(marker)
    try:
        submission, out = _layout(grading)
        values = {"MARKER": marker, "PORT": str(listener.port), "CALL_SECONDS": str(attack.options["call_seconds"])}
        materialize(attack, submission, values)
        watch = _watch(grading, run_root, siblings, marker)
        watch.start()
        graded = _grade(grading, submission, out, attack.problem, attack.options, reaper)
        tags = [marker, str(grading)]
        deadline = time.monotonic() + 10
        while (left := _left_behind(tags)) and time.monotonic() < deadline:
            time.sleep(0.5)
        left += reaper.orphans()
        _kill_left_behind(tags)
        time.sleep(1)
        control, plain = controls[attack.control], controls[reference(attack.problem)]
        limit = float(attack.options["budget_seconds"]) + SLACK_SECONDS
        row.facts["points"] = _points_fact(attack, graded, control, plain)
        row.facts["time"] = (graded.returncode is not None and graded.seconds <= limit, f"{graded.seconds:.0f} s")
        row.facts["processes"] = (not left, "none left" if not left else f"{len(left)} left: {left[0]}")
        changed = watch.changes()
        row.facts["files"] = (not changed, "unchanged" if not changed else f"{len(changed)}: {', '.join(changed[:3])}")
        row.facts["results"] = _results_fact(graded, _digest(out), control)
        row.facts["leaks"] = _leak_fact(graded, control.text + plain.text, secrets_)
        contacted = listener.contacted()
        row.facts["network"] = (not contacted, "unreached" if not contacted else f"reached by {', '.join(contacted)}")
        row.isolation = dict(kit_data(graded.data or {}).get("isolation", {}))
    except Exception as exc:  # noqa: BLE001 - a broken check is a failed row, not a crash of the table
        row.facts["check"] = (False, f"{type(exc).__name__}: {exc}")
    finally:
        listener.close()
    return row


def _grade_control(key: tuple[str, str, str, str], run_root: Path, options: dict, reaper: Reaper) -> Graded:
    kind, module, function, problem = key
    grading = run_root / "-".join(filter(None, ("control", kind, problem, module, function)))
    submission, out = _layout(grading)
    materialize_control(kind, module, function, submission)
    return _grade(grading, submission, out, problem, options, reaper)


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


def main(*, quick: bool = False, attacks: list[str] | None = None, jobs: int = 2) -> int:
    """Grade each selected attack (all, the quick subset, or those named) and print one row each; 0 when all hold."""
    catalog = [a for a in load() if (not attacks or a.id in attacks) and (not quick or a.quick or attacks)]
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
        keys = sorted({a.control for a in catalog} | {reference(a.problem) for a in catalog})
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            graded = list(pool.map(lambda key: _grade_control(key, run_root, options, reaper), keys))
        controls = dict(zip(keys, graded))
        broken = [f"{'/'.join(filter(None, key))}: {g.stderr[-300:] or 'no results'}" for key, g in controls.items()
                  if g.data is None]
        for line in broken:
            console.print(f"[red]control failed to grade[/]: {line}")
        siblings = {a.id for a in catalog} | {p.name for p in run_root.iterdir()}
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            rows = list(pool.map(lambda a: _check_attack(a, run_root, siblings, controls, secrets_, reaper), catalog))
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
