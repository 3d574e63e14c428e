"""A Gradescope container's limits around ``run_autograder``: memory cgroup, CPU share, timeout.

Gradescope runs ``/autograder/run_autograder`` in a container whose memory limit covers the
whole process tree (page cache included) and whose CPU share may be half a core. This runs an
installed bundle's ``run_autograder`` (``setup.sh`` already done under ``--root``) the same way,
in a memory cgroup of ``--memory-mb`` (and a CPU quota of ``--cpus`` where the host's cgroups
have the cpu controller), then prints the cgroup's peak memory (and the peak of what cannot be
reclaimed, anonymous memory), how many processes the kernel ended for memory meanwhile (counted for
the whole host: run it alone), the wall time and the score in results.json::

    python -m grader.bench.container --root /tmp/gs/autograder --submission solutions
    python -m grader.bench.container --root /tmp/gs/autograder --submission S --memory-mb 1536 --cpus 1

Needs root (or a delegated cgroup). The submission is copied into ``ROOT/submission``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from grader.bench import records
from grader.containment import cgroup as cgroups

PERIOD_US = 100_000
READ_ONLY_CGROUPS = ('for d in $(findmnt -rn -o TARGET | grep "^/sys/fs/cgroup"); do mount -o remount,ro,bind "$d"; done; '
                     'exec "$@"')


def _cpu_quota(cpus: float, name: str) -> Path | None:
    """A cpu cgroup (v1) limiting to ``cpus`` cores, or None where the host has no cpu controller here."""
    own = cgroups.own_folder("cpu")
    if own is None or not (own / "cpu.cfs_quota_us").exists():
        return None
    folder = own / name
    folder.mkdir(exist_ok=True)
    (folder / "cpu.cfs_period_us").write_text(str(PERIOD_US))
    (folder / "cpu.cfs_quota_us").write_text(str(int(cpus * PERIOD_US)))
    return folder


def _join(group: cgroups.Cgroup, cpu: Path | None) -> None:
    group.place({os.getpid()})
    if cpu is not None:
        (cpu / "cgroup.procs").write_text(str(os.getpid()))


def _interpreter(root: Path) -> str:
    """The autograder's Python and torch versions, as setup.sh installed them."""
    probe = "import sys, torch; print('Python', sys.version.split()[0], 'torch', torch.__version__)"
    done = subprocess.run([str(root / "venv" / "bin" / "python"), "-c", probe], capture_output=True, text=True)
    return done.stdout.strip() or "interpreter unknown"


def _peak_bytes(group: cgroups.Cgroup) -> int:
    name = "memory.max_usage_in_bytes" if group.version == 1 else "memory.peak"
    return int((group.folders[0] / name).read_text())


def _anonymous_bytes(group: cgroups.Cgroup) -> int:
    """Memory the kernel cannot reclaim without swap (anonymous pages and tmpfs), now."""
    stat = dict(line.split() for line in (group.folders[0] / "memory.stat").read_text().splitlines())
    if group.version == 1:
        return int(stat["total_rss"]) + int(stat["total_shmem"])
    return int(stat["anon"]) + int(stat["shmem"])


def _oom_kills() -> int:
    """Processes the kernel has ended for memory since boot (``/proc/vmstat``): a worker's cgroup, nested in
    the container's and gone with the worker, keeps no count of its own to read afterwards."""
    for line in Path("/proc/vmstat").read_text().splitlines():
        name, _, value = line.partition(" ")
        if name == "oom_kill":
            return int(value)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.bench.container", description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="the autograder root setup.sh installed into")
    parser.add_argument("--submission", type=Path, required=True)
    parser.add_argument("--memory-mb", type=int, default=768, help="the container's memory (Gradescope's default)")
    parser.add_argument("--cpus", type=float, default=0.5, help="the container's CPU share (Gradescope's default)")
    parser.add_argument("--timeout-seconds", type=float, default=600, help="Gradescope's default timeout")
    parser.add_argument("--read-only-cgroups", action="store_true",
                        help="as in a Docker container: the grader cannot make a cgroup for its worker (watchdog only)")
    args = parser.parse_args(argv)
    if not (args.root / "run_autograder").is_file() or not args.submission.is_dir():
        parser.error("--root needs ROOT/run_autograder (an installed bundle) and --submission a folder")
    run = records.start("container", argv)
    group = cgroups.create(args.memory_mb << 20, processes=4096)
    if group is None:
        parser.error("this host gives no writable memory cgroup (run as root, or in a delegated cgroup v2)")
    cpu = _cpu_quota(args.cpus, f"bench-container-{os.getpid()}")
    shutil.rmtree(args.root / "submission", ignore_errors=True)
    shutil.copytree(args.submission, args.root / "submission")
    results = args.root / "results" / "results.json"
    env = {**os.environ, "AUTOGRADER_ROOT": str(args.root), "KIT_RESULTS": str(results)}
    started, kills = time.monotonic(), _oom_kills()
    try:
        command = ["bash", str(args.root / "run_autograder")]
        if args.read_only_cgroups:
            command = ["unshare", "--mount", "--propagation", "private", "sh", "-c", READ_ONLY_CGROUPS, "sh", *command]
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True, start_new_session=True,
                                   preexec_fn=lambda: _join(group, cpu))  # before anything runs: all of it counts
        anonymous = 0
        while process.poll() is None and time.monotonic() - started < args.timeout_seconds:
            anonymous = max(anonymous, _anonymous_bytes(group))
            time.sleep(0.2)
        if process.poll() is None:
            group.kill()
            ended = f"killed at the {args.timeout_seconds:g} s timeout"
        else:
            ended = f"exit {process.returncode}"
        stderr = process.communicate()[1]
        wall = time.monotonic() - started
        peak, oom = _peak_bytes(group), _oom_kills() - kills
    finally:
        group.remove()
        if cpu is not None:
            cpu.rmdir()
    data = json.loads(results.read_text()) if results.is_file() else {}
    print(f"memory limit {args.memory_mb} MiB, {args.cpus:g} CPU ({'quota set' if cpu else 'no cpu controller'}), "
          f"{_interpreter(args.root)}, "
          f"{'no cgroup for the worker (read-only)' if args.read_only_cgroups else 'cgroups writable'}")
    print(f"run_autograder: {ended} after {wall:.0f} s; peak memory of the tree {peak / 2**20:,.0f} MiB "
          f"(page cache included), of which anonymous {anonymous / 2**20:,.0f} MiB at most; "
          f"processes the kernel ended for memory: {oom or 'none'}")
    print(f"results.json: score {data.get('score')}, {len(data.get('tests', []))} entries, "
          f"grader error: {(data.get('extra_data') or {}).get('grader_error') or 'none'}")
    if stderr.strip():
        print("stderr (last lines):", *stderr.strip().splitlines()[-5:], sep="\n  ")
    run.write(f"a Gradescope container ({args.memory_mb} MiB, {args.cpus:g} CPU) grading {args.submission.name}",
              {"ended": ended, "wall s": round(wall, 1), "peak MiB": round(peak / 2**20), "anonymous MiB":
               round(anonymous / 2**20), "ended by the kernel": oom, "score": data.get("score", "none")})
    return 0


if __name__ == "__main__":
    sys.exit(main())
