"""The hostile corpus (grader/selfproof/hostile): it is inert in the repository, every attack applies to
the reference, the check's detectors do detect, and the quick subset holds (a few minutes), as does a warm
subset graded as a batch grades (workers forked from a warm template)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from grader.containment import template
from grader.selfproof import hostile
from grader.selfproof.hostile import check
from grader.selfproof.hostile.facts import leak_fact, points_fact
from grader.selfproof.hostile.grading import Graded
from grader.selfproof.hostile.listener import Listener
from grader.selfproof.hostile import processes
from grader.selfproof.hostile.processes import Reaper, left_behind
from grader.selfproof.hostile.watch import Watch
from grader.paths import KIT_ROOT as KIT
from grader.grading.results import GradingResult, TestResult

VALUES = {"MARKER": "kit-hostile-test", "PORT": "9", "CALL_SECONDS": "4"}


def test_the_corpus_is_inert_in_the_repository():
    folder = KIT / "grader" / "hostile"
    live = [p.name for p in folder.rglob("*") if p.name in ("conftest.py", "sitecustomize.py", "usercustomize.py")
            or p.suffix == ".pth" or (p.name.startswith("test_") and p.suffix == ".py")]
    assert not live, f"files that tools load by themselves: {live}"
    collected = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", str(folder)], cwd=KIT,
                               capture_output=True, text=True, timeout=120)
    assert "no tests collected" in collected.stdout or collected.returncode == 5, collected.stdout[-2000:]


@pytest.mark.parametrize("attack", hostile.load(), ids=lambda a: a.id)
def test_each_attack_applies_to_the_reference(tmp_path, attack):
    root = hostile.materialize(attack, tmp_path, VALUES)
    changed = root / "assignment" / f"{attack.module}.py"
    assert changed.read_text() != (hostile.SOLUTIONS / f"{attack.module}.py").read_text() or attack.files  # or beside it
    for path in root.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")  # compiled, never run
    assert "@MARKER@" not in "".join(p.read_text() for p in root.rglob("*") if p.is_file())
    kind, module, function, problem = attack.control
    control = hostile.materialize_control(kind, module, function, tmp_path / "control")
    for path in control.rglob("*.py"):
        compile(path.read_text(), str(path), "exec")


def test_there_is_a_quick_subset_of_every_kind():
    quick = [a for a in hostile.load() if a.quick]
    assert {a.expect for a in quick} == set(hostile.EXPECTATIONS)


# -- the detectors detect -----------------------------------------------------------------------

def test_watch_sees_new_changed_and_removed_files(tmp_path):
    (tmp_path / "kept.txt").write_text("a")
    (tmp_path / "gone.txt").write_text("b")
    watch = Watch([(tmp_path, None, frozenset())], shared=(), marker="m")
    watch.start()
    (tmp_path / "kept.txt").write_text("changed")
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "deep").mkdir()
    (tmp_path / "deep" / "new.txt").write_text("c")
    changes = "\n".join(watch.changes())
    assert "kept.txt (changed)" in changes and "gone.txt (removed)" in changes and "new.txt (new)" in changes


def test_listener_sees_a_connection():
    listener = Listener("kit-hostile-test-listener")
    try:
        assert listener.contacted() == []
        socket.create_connection(("127.0.0.1", listener.port), timeout=2).close()
        time.sleep(0.2)
        assert "tcp" in listener.contacted()
    finally:
        listener.close()


def test_processes_left_behind_are_found():
    tag = f"kit-hostile-test-{os.getpid()}"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", tag])
    try:
        assert any(str(sleeper.pid) in line for line in left_behind([tag]))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not left_behind([tag])


def test_a_grading_started_while_orphans_are_sought_is_not_one(monkeypatch):
    """Attacks are checked two at a time: a grading started (and tracked) while another attack's orphans are
    sought is spared (it was killed when the tracked set was read before the walk)."""
    reaper = Reaper()
    started: list[subprocess.Popen] = []
    walk = processes.tree.processes

    def walk_while_a_grading_starts(root: int) -> list:
        with reaper.lock:
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
            reaper.tracked.add(child.pid)
        started.append(child)
        return walk(root)

    monkeypatch.setattr(processes.tree, "processes", walk_while_a_grading_starts)
    try:
        assert reaper.orphans() == []
        assert started[0].poll() is None
    finally:
        monkeypatch.undo()
        for child in started:
            child.kill()
            child.wait()
        reaper.close()


def _graded(statuses: dict[str, str], score: float, text: str = "") -> Graded:
    tests = tuple(TestResult(problem="P1", module="memory", name=n, points=1.0, status=s, nodeid=n)
                  for n, s in statuses.items())
    data = GradingResult(tests=tests).to_gradescope_dict()
    data["score"] = score
    return Graded(0, 1.0, data, text, "", "")


def test_points_gained_or_lost_are_found():
    attack = next(a for a in hostile.load() if a.expect == "wrong")
    control = _graded({"t::a": "passed", "t::b": "failed"}, 1)
    gained = _graded({"t::a": "passed", "t::b": "passed"}, 2)
    lost = _graded({"t::a": "failed", "t::b": "failed"}, 0)
    assert points_fact(attack, control, control, control)[0]
    assert "gained b" in points_fact(attack, gained, control, control)[1]
    assert "lost a" in points_fact(attack, lost, control, control)[1]


def test_leaked_lines_are_found():
    secret = "return math.copysign(magnitude, sign)  # a line of the reference"
    leaked = _graded({}, 0, text=f"raised RuntimeError: {secret}")
    assert not leak_fact(leaked, allowed="", secrets_={secret})[0]
    assert leak_fact(leaked, allowed=secret, secrets_={secret})[0]


# -- the quick subset ---------------------------------------------------------------------------

@pytest.mark.slow
def test_quick_attacks_gain_nothing_and_the_grader_survives(capsys):
    code = check.main(quick=True)
    report = capsys.readouterr().out
    print(report)  # the attack table, visible with -s or on failure
    assert code == 0, report[-6000:]


# The attacks on what a forked worker could reach that a cold one could not (the template, a root process
# outside the sandbox: its /proc, its signals; processes left when the worker ends), and on P7's fresh loader (a
# second worker of the same submission). The syscall filter of a forked worker: containment/test_template.py.
WARM = ["read-other-proc", "kill-every-process", "detached-sleepers", "p7-checkpoint-kept-in-memory"]


@pytest.mark.slow
@pytest.mark.skipif(not template.usable(), reason="workers are forked only as root, with bubblewrap")
def test_attacks_on_the_sandbox_gain_nothing_from_workers_forked_warm(capsys):
    code = check.main(attacks=WARM, warm=True)
    report = capsys.readouterr().out
    print(report)
    assert code == 0, report[-6000:]
    assert "forked from a warm template" in " ".join(report.split()), report[-3000:]


def test_attacks_are_parsed_one_at_a_time_though_built_in_threads(monkeypatch):
    """ast.parse is not thread-safe in CPython (a shared recursion depth): edit() takes turns."""
    inside, most = [0], [0]
    real_parse = hostile.ast.parse

    def slow_parse(source: str, *args: object, **kwargs: object) -> object:
        inside[0] += 1
        most[0] = max(most[0], inside[0])
        time.sleep(0.05)  # lets another thread in, as a finalizer releasing the GIL mid-parse does
        inside[0] -= 1
        return real_parse(source, *args, **kwargs)

    monkeypatch.setattr(hostile.ast, "parse", slow_parse)
    with ThreadPoolExecutor(max_workers=4) as pool:
        list(pool.map(lambda n: hostile.edit(f"x = {n}\n", "memory", append="y = 1"), range(8)))
    assert most[0] == 1, f"{most[0]} parses ran at once"
