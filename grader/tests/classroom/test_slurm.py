"""grader/classroom/cluster/submit.sh: what it asks sbatch for (a fake sbatch; GPUs only with --gpu) and its
usage errors; then, on a real Slurm, it grades a small class in 2 shards and the merged gradebook
equals a local ``grader batch`` + ``grader gradebook``; a shard cancelled mid-way (scancel) keeps
what it graded, and submitting again grades only what is left.

The real-Slurm test is slow and opt-in: ``KIT_SLURM_TESTS=1`` starts a one-node Slurm of its own
(Debian's slurm-wlm and munge, installed with apt when missing; needs root), with its config,
state and logs in a temporary folder, and stops its daemons at the end; ``KIT_SLURM_TESTS=existing``
submits to the cluster that ``sbatch`` reaches (run pytest with ``--basetemp`` on a file system
the compute nodes share; extra sbatch options such as ``--partition=...`` in ``KIT_SLURM_SBATCH_ARGS``).
"""

from __future__ import annotations

import csv
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _classroom import KIT, package, zipped

from grader.classroom.batch import shard_of

MODE = os.environ.get("KIT_SLURM_TESTS", "")
real_slurm = pytest.mark.skipif(MODE not in ("1", "existing"), reason="opt-in: KIT_SLURM_TESTS=1 (a one-node Slurm "
                                "of its own) or KIT_SLURM_TESTS=existing (the cluster sbatch reaches)")

SUBMIT = KIT / "grader" / "classroom" / "cluster" / "submit.sh"
GRADER_ARGS = ["--gpu", "off", "--problems", "P2", "--profile", "ci"]  # what the shards run, and the local batch
SBATCH_ARGS = ["--cpus-per-task=1", "--mem=1G", "--time=15", *shlex.split(os.environ.get("KIT_SLURM_SBATCH_ARGS", ""))]
PER_RUN = {"graded_at"}  # gradebook columns that differ from one grading to the next
WAIT_SECONDS = 600


# -- what submit.sh asks sbatch for ---------------------------------------------------------------

def _fake_sbatch(tmp_path: Path, refuse: str = "") -> dict[str, str]:
    """An environment whose sbatch logs ``KIT_GPU`` and its arguments, one call a line, and answers job 7;
    ``--test-only`` logs nothing and refuses a request holding ``refuse``, as Slurm does a GPU where none is."""
    folder = tmp_path / "bin"
    folder.mkdir()
    (folder / "sbatch").write_text(
        '#!/bin/sh\ncase " $* " in *" --test-only "*)\n'
        '  case " $* " in *" $REFUSE "*) echo "sbatch: error: Invalid generic resource (gres) specification" >&2; '
        'exit 1;; esac\n  exit 0;;\nesac\necho "$KIT_GPU $*" >> "$SBATCH_LOG"\necho 7\n')
    (folder / "sbatch").chmod(0o755)
    (tmp_path / "class").mkdir()
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}", "SBATCH_LOG": str(tmp_path / "calls"),
            "REFUSE": refuse or "--no-such-option"}


@pytest.mark.parametrize("mode", ["", "--gpu", "--cpu-only"])
def test_submit_asks_for_gpus_only_for_gpu_tests_by_default(tmp_path, mode):
    """Default: a CPU array (--gpu off) and a GPU array (--gpu only, one GPU a task), the merge after both."""
    env = _fake_sbatch(tmp_path)
    command = [str(SUBMIT), *filter(None, [mode]), "--gpu-shards", "2", "--gpu-sbatch", "--partition=g", "class",
               "out", "3", "--", "--partition=p", "--mem=8G"]
    said = _run(command, env, cwd=tmp_path)
    *arrays, merge = (tmp_path / "calls").read_text().splitlines()
    expected = {"": [("off", "3", False), ("only", "2", True)], "--gpu": [("require", "3", True)],
                "--cpu-only": [("off", "3", False)]}[mode]
    assert [(a.split()[0], a.split("--array=1-")[1].split()[0], "--gres=gpu:1" in a.split()) for a in arrays] == expected
    assert all(("--partition=g" in a.split()) == gres for a, (_, _, gres) in zip(arrays, expected))
    assert all("grade_array.sbatch class out" in a and "--partition=p --mem=8G" in a for a in arrays)
    assert f"--dependency=afterany:{':'.join('7' for _ in arrays)}" in merge.split()
    assert "merge.sbatch out" in merge and "--gres" not in merge and "--partition=p --mem=8G" in merge
    assert ("GPU tests: 2 shards on GPUs" in said) == (mode == "")


def test_submit_queues_nothing_where_sbatch_refuses_an_array(tmp_path):
    """A cluster without GPUs refuses the GPU array: submit.sh says so before any array is queued (the CPU
    array included), names the ways on, and --cpu-only then submits."""
    env = _fake_sbatch(tmp_path, refuse="--gres=gpu:1")
    run = subprocess.run([str(SUBMIT), "class", "out", "2"], env=env, cwd=tmp_path, capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 2 and "sbatch refuses the gpu array, so nothing was submitted" in run.stderr, run.stderr
    assert "Invalid generic resource" in run.stderr and "--cpu-only" in run.stderr
    assert not (tmp_path / "calls").exists()
    _run([str(SUBMIT), "--cpu-only", "class", "out", "2"], env, cwd=tmp_path)
    assert len((tmp_path / "calls").read_text().splitlines()) == 2  # the CPU array, the merge


@pytest.mark.parametrize("arguments, error", [
    ([], "expected SUBMISSIONS OUT [SHARDS]"),
    (["class", "out", "2", "extra"], "expected SUBMISSIONS OUT [SHARDS]"),
    (["class", "out", "0"], "SHARDS must be a positive whole number, not '0'"),
    (["class", "out", "two"], "SHARDS must be a positive whole number, not 'two'"),
    (["--gpus", "class", "out"], "unknown option --gpus"),
    (["--gpu", "--cpu-only", "class", "out"], "--gpu and --cpu-only exclude each other"),
    (["--gpu-shards", "0", "class", "out"], "--gpu-shards must be a positive whole number, not '0'"),
    (["missing", "out"], "no such folder or archive: missing"),
])
def test_submit_refuses_bad_arguments_before_submitting_anything(tmp_path, arguments, error):
    run = subprocess.run([str(SUBMIT), *arguments], env=_fake_sbatch(tmp_path), cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2 and f"submit.sh: {error}\nusage: grader/classroom/cluster/submit.sh" in run.stderr, run.stderr
    assert not (tmp_path / "calls").exists()


# -- a one-node Slurm of the test's own ----------------------------------------------------------

def _install() -> None:
    """Debian's slurm-wlm and munge, installed with apt when missing; skip where that cannot be done."""
    if all(shutil.which(tool, path="/usr/sbin:/usr/bin") for tool in ("slurmctld", "slurmd", "munged", "sbatch")):
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip("Slurm is not installed and this is not root with apt-get to install slurm-wlm and munge")
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", "slurm-wlm", "munge"]):
        run = subprocess.run(command, capture_output=True, text=True, timeout=600,
                             env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        if run.returncode != 0:
            pytest.skip(f"{' '.join(command[:2])} failed, no Slurm to test on: {run.stdout[-300:]}{run.stderr[-300:]}")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _config(root: Path, host: str) -> str:
    """slurm.conf for this machine alone: a CPU partition (default), a GPU partition where NVIDIA GPUs are."""
    memory_mb = int(Path("/proc/meminfo").read_text().split()[1]) // 2048
    gpus = _gpus()
    lines = ["ClusterName=kit-test", f"SlurmctldHost={host}", f"SlurmctldPort={_free_port()}",
             f"SlurmdPort={_free_port()}", "SlurmUser=root", "SlurmdUser=root", "AuthType=auth/munge",
             f"AuthInfo=socket={root}/munge.socket", "CredType=cred/munge", "ProctrackType=proctrack/linuxproc",
             "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
             "AccountingStorageType=accounting_storage/none", "MpiDefault=none", "ReturnToService=2", "KillWait=5",
             f"StateSaveLocation={root}/state", f"SlurmdSpoolDir={root}/spool", f"SlurmctldPidFile={root}/slurmctld.pid",
             f"SlurmdPidFile={root}/slurmd.pid", f"SlurmctldLogFile={root}/slurmctld.log",
             f"SlurmdLogFile={root}/slurmd.log"]
    node = f"NodeName={host} CPUs={os.cpu_count()} RealMemory={memory_mb} State=UNKNOWN"
    if gpus:
        (root / "gres.conf").write_text("".join(f"Name=gpu File=/dev/{name}\n" for name in gpus))
        lines += ["GresTypes=gpu", f"{node} Gres=gpu:{len(gpus)}", f"PartitionName=gpu Nodes={host} State=UP"]
    else:
        lines.append(node)
    return "\n".join([*lines, f"PartitionName=cpu Nodes={host} Default=YES MaxTime=INFINITE State=UP", ""])


def _start(root: Path, env: dict[str, str], daemons: list[subprocess.Popen]) -> None:
    """munged, slurmctld and slurmd in the foreground, each in its own session (into ``daemons`` as started)."""
    (root / "munge.key").write_bytes(os.urandom(1024))
    (root / "munge.key").chmod(0o600)
    commands = [["munged", "--foreground", "--force", f"--socket={root}/munge.socket", f"--key-file={root}/munge.key",
                 f"--pid-file={root}/munged.pid", f"--log-file={root}/munged.log", f"--seed-file={root}/munged.seed"],
                ["slurmctld", "-D"], ["slurmd", "-D"]]
    for command in commands:
        daemons.append(subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True))
        if command[0] == "munged":
            _until(lambda: (root / "munge.socket").exists(), 30, f"munged did not start: see {root}/munged.log")


def _stop(daemons: list[subprocess.Popen], env: dict[str, str]) -> None:
    """Cancel every job of this cluster (slurmstepd outlives slurmd), then stop the daemons, last started first."""
    subprocess.run(["scancel", "--user", "root"], env=env, capture_output=True, timeout=30)
    try:
        _until(lambda: not _squeue(env), 30, "jobs still listed after scancel")
    except AssertionError:
        pass  # the daemons are stopped all the same
    for daemon in reversed(daemons):
        daemon.send_signal(signal.SIGTERM)
        try:
            daemon.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(daemon.pid, signal.SIGKILL)
            daemon.wait()


@pytest.fixture(scope="module")
def slurm() -> Iterator[dict[str, str]]:
    """The environment under which sbatch/squeue/scancel reach the cluster the test submits to."""
    if MODE == "existing":
        if shutil.which("sbatch") is None:
            pytest.skip("KIT_SLURM_TESTS=existing, but no sbatch on PATH")
        yield dict(os.environ)
        return
    _install()
    if os.geteuid() != 0:
        pytest.skip("a one-node Slurm of the test's own runs its daemons as root")
    root = Path(tempfile.mkdtemp(prefix="kit-slurm-"))  # short: the munge socket's path has a length limit
    (root / "state").mkdir()
    (root / "spool").mkdir()
    (root / "slurm.conf").write_text(_config(root, socket.gethostname().split(".")[0]))
    env = {**os.environ, "SLURM_CONF": str(root / "slurm.conf")}
    daemons: list[subprocess.Popen] = []
    try:
        _start(root, env, daemons)
        _until(lambda: "idle" in _run(["sinfo", "-h", "-o", "%T"], env), 60,
               f"the node did not come up: see {root}/slurmctld.log and {root}/slurmd.log")
        yield env
    finally:
        _stop(daemons, env)
        shutil.rmtree(root, ignore_errors=True)


# -- submitting and watching -----------------------------------------------------------------------

def _run(command: list[str], env: dict[str, str], cwd: Path | None = None) -> str:
    run = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"{shlex.join(command)}: exit {run.returncode}\n{run.stdout}{run.stderr}"
    return run.stdout


def _until(condition, seconds: float, message: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, message
        time.sleep(0.2)


def _squeue(env: dict[str, str], job: str | None = None) -> list[str]:
    """``ID STATE`` of each queued or running job (array tasks one a line), this job's alone if given."""
    command = ["squeue", "-h", "-r", "-o", "%i %T", *(["-j", job] if job else [])]
    run = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    return run.stdout.split("\n")[:-1] if run.returncode == 0 else []  # a finished job unknown to squeue: error


def _gpus() -> list[str]:
    """This machine's NVIDIA GPU devices (the one-node cluster declares them as its gpu gres)."""
    return sorted(p.name for p in Path("/dev").glob("nvidia[0-9]*"))


def _submit(folder: Path, env: dict[str, str]) -> tuple[str, str]:
    """submit.sh CLASS OUT 2 from ``folder`` (in two passes where the node has GPUs, else --cpu-only):
    (the CPU array's job id, the merge's)."""
    mode = [] if _gpus() or MODE == "existing" else ["--cpu-only"]
    said = _run([str(SUBMIT), *mode, "class", "out", "2", "--", *SBATCH_ARGS], env, cwd=folder)
    array, *_, merge = re.findall(r"job (\d+)", said)
    return array, merge


def _shard_seconds(env: dict[str, str], array: str) -> dict[str, str]:
    """Each array task's run time as Slurm reports it (scontrol's RunTime), for the record."""
    shown = subprocess.run(["scontrol", "-o", "show", "job", array], env=env, capture_output=True, text=True).stdout
    return dict(re.findall(r"ArrayTaskId=(\d+) .*?RunTime=(\S+)", shown))


def _gradebook(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as stream:
        return [{column: value for column, value in row.items() if column not in PER_RUN} for row in csv.DictReader(stream)]


def _class(root: Path) -> Path:
    """Correct, broken, stub, empty, zipped: shard 1 of 2 holds four of them, graded in this order."""
    root.mkdir()
    package(KIT / "solutions", root / "broken", edit={"strides": "def broken(:"})
    package(KIT / "solutions", root / "correct")
    (root / "empty").mkdir()
    package(KIT / "assignment", root / "stub")
    zipped(package(KIT / "solutions", root / "zipped"))
    assert {name: shard_of(name, 2) for name in ("broken", "correct", "empty", "stub", "zipped")} == {
        "broken": 1, "correct": 1, "empty": 1, "stub": 1, "zipped": 2}
    return root


@pytest.mark.slow
@real_slurm
def test_submit_grades_in_shards_as_a_local_batch_and_resumes_a_cancelled_shard(slurm, tmp_path):
    _class(tmp_path / "class")
    env = {**slurm, "KIT_PYTHON": sys.executable, "KIT_JOBS": "1", "KIT_GRADER_ARGS": shlex.join(GRADER_ARGS[2:])}
    shard = tmp_path / "out" / "shard-1" / "results"
    if not _gpus() and MODE != "existing":  # two passes need a GPU: refused, and nothing queued
        refused = subprocess.run([str(SUBMIT), "class", "out", "2", "--", *SBATCH_ARGS], env=env, cwd=tmp_path,
                                 capture_output=True, text=True, timeout=120)
        assert refused.returncode == 2 and "nothing was submitted" in refused.stderr, refused.stderr
        assert _squeue(env) == []

    started = time.monotonic()
    array, merge = _submit(tmp_path, env)
    _until(lambda: any(shard.glob("*.json")), WAIT_SECONDS, f"shard 1 wrote no result: {_squeue(env)}")
    _run(["scancel", f"{array}_1"], env)  # its second student ("correct") is being graded
    _until(lambda: not _squeue(env, merge), WAIT_SECONDS, f"the merge did not run: {_squeue(env)}")
    kept = {path.name: path.read_bytes() for path in shard.glob("*.json")}
    assert 0 < len(kept) < 4, kept.keys()
    assert "interrupted" in (tmp_path / f"slurm-grade-{array}_1.out").read_text()
    assert f"{4 - len(kept)} missing" in (tmp_path / f"slurm-gradebook-{merge}.out").read_text()
    print(f"first submission, shard 1 cancelled: {time.monotonic() - started:.0f} s; {_shard_seconds(env, array)}")

    started = time.monotonic()
    array, merge = _submit(tmp_path, env)
    _until(lambda: not _squeue(env, merge), WAIT_SECONDS, f"the merge did not run: {_squeue(env)}")
    print(f"second submission: {time.monotonic() - started:.0f} s; {_shard_seconds(env, array)}")
    logs = {index: (tmp_path / f"slurm-grade-{array}_{index}.out").read_text() for index in (1, 2)}
    assert f"{len(kept)} unchanged since graded, {4 - len(kept)} to grade" in logs[1], logs[1]
    assert "1 unchanged since graded, 0 to grade" in logs[2], logs[2]
    assert {name: (shard / name).read_bytes() for name in kept} == kept  # results graded before scancel: kept as they were

    python = [sys.executable, "-m", "grader"]
    started = time.monotonic()
    _run([*python, "batch", "class", "--out", "local", "--jobs", "2", *GRADER_ARGS], slurm, cwd=tmp_path)
    summary = _run([*python, "gradebook", "local", "--csv", "local/gradebook.csv"], slurm, cwd=tmp_path)
    print(f"local batch + gradebook: {time.monotonic() - started:.0f} s")
    assert "5 students (4 graded, 1 errors, 0 missing)" in summary  # the empty folder: an error row
    assert "5 students (4 graded, 1 errors, 0 missing)" in (tmp_path / f"slurm-gradebook-{merge}.out").read_text()
    assert _gradebook(tmp_path / "out" / "gradebook.csv") == _gradebook(tmp_path / "local" / "gradebook.csv")
