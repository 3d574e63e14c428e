"""Judge-side containment (grader/containment): uid claims, cgroups, the syscall filter, bubblewrap."""

from __future__ import annotations

import json
import os
import sys

import pytest

from grader.confined.config import WorkerConfig
from grader.containment import cgroup as cgroups
from grader.containment import syscalls, tree, uids

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="containment is Linux's")
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="uids are dedicated to workers only by root")


@root_only
def test_a_claimed_uid_is_never_handed_out_twice_until_released():
    held = [uids.claim() for _ in range(3)]
    try:
        assert len({c.uid for c in held}) == 3
        assert all(uids.UID_BASE <= c.uid < uids.UID_BASE + uids.UID_SPAN for c in held)
        first = held[0].uid
        held[0].release()
        again = uids.claim()
        held[0] = again
        assert again.uid == first  # the lock, not a process table, decides: released means free
    finally:
        for claim in held:
            claim.release()


def test_a_cgroup_holds_its_limits_and_is_removed():
    group = cgroups.create(256 << 20, 16)
    if group is None:
        pytest.skip("this host gives the grader no writable cgroup")
    try:
        memory = group.folders[0] / ("memory.max" if group.version == 2 else "memory.limit_in_bytes")
        assert int(memory.read_text()) == 256 << 20
        assert "256 MiB" in group.describe() and not group.oom_killed() and not group.pids()
    finally:
        group.remove()
    assert not any(folder.exists() for folder in group.folders)


def test_require_strong_refuses_a_host_without_strong_isolation(monkeypatch, capsys):
    from grader import cli
    from grader.containment import level

    monkeypatch.setattr(level, "host", lambda: level.Level("rlimits only", ("namespaces (refused here)",)))
    assert cli.main(["grade", "solutions", "--isolation", "require-strong", "--problems", "P1"]) == 2
    assert "lacks namespaces (refused here)" in capsys.readouterr().err


def test_the_host_level_names_its_mechanism():
    from grader.containment import level

    found = level.host()
    assert found.mechanism.split(" + ")[0] in ("bubblewrap", "hand-written namespaces", "rlimits only")
    assert found.strong == (not found.lacks)


def test_calls_made_by_number_are_resolved_by_libseccomp_not_a_table():
    if syscalls.deny_filter() is None:
        pytest.skip("libseccomp is not available here")
    found = syscalls.numbers((*syscalls.BY_NUMBER, "no_such_call"))
    assert set(found) == set(syscalls.BY_NUMBER) and len(set(found.values())) == len(found)
    assert all(number > 0 for number in found.values())


def test_a_worker_configuration_crosses_as_json_and_refuses_other_keys():
    config = WorkerConfig(workdir="/w", root="/r", masks=["/kit"], readonly=[], expose=["/usr"], uid=None, gid=None,
                          request_fd=3, response_fd=4, placement_fd=None, file_bytes=1, disk_bytes=2, processes=3,
                          namespaces=True, reachable=True, bubblewrap=False, syscall_filter=None, syscalls="none",
                          syscall_numbers={"capset": 126})
    assert WorkerConfig.from_json(config.to_json()) == config
    for changed in ({**json.loads(config.to_json()), "extra": 1}, {"workdir": "/w"}, [1]):
        with pytest.raises(ValueError, match="exactly the keys"):
            WorkerConfig.from_json(json.dumps(changed))


@pytest.mark.skipif(not tree.SCHEDSTAT, reason="the kernel keeps no schedstat")
def test_the_tree_reading_counts_its_wait_for_a_cpu():
    # P4's paused rounds read it (grader/judge/drivers/flops.py, Call.stretch). A process that is always
    # ready to run either runs or waits for a CPU, so its CPU time and its wait add up to the time that
    # passed, however loaded the machine; sharing one CPU with two others, it waits at least half of it.
    import subprocess
    import time

    cpu = min(os.sched_getaffinity(0))
    spin = [sys.executable, "-c", (f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\nend = time.time() + 3\n"
                                   "while time.time() < end: pass")]
    processes = [subprocess.Popen(spin) for _ in range(3)]
    try:
        meter = tree.Meter(processes[0].pid)
        time.sleep(0.3)
        before, begin = meter.read(), time.monotonic()
        time.sleep(1.0)
        after, passed = meter.read(), time.monotonic() - begin
    finally:
        for process in processes:
            process.kill()
            process.wait()
    waited = after.waited_seconds - before.waited_seconds
    assert abs(after.cpu_seconds - before.cpu_seconds + waited - passed) < 0.2 * passed
    assert waited > 0.5 * passed
