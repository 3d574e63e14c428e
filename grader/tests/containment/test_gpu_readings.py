"""The GPU readings taken from outside a worker (grader/containment/gpu.py), as far as a machine
without a GPU can check them: the pinned-memory reading counts shared /dev/zero mappings and
nothing else, every NVML reading answers None (with a reason) where NVML cannot be used, a backend
answers them for its worker's processes (``Backend.measure_gpu``, here with a fake NVML), and the
attacks on GPU tests are not run without CUDA. Their proof on a GPU is grader/bench/gpu_runner.sh
(README, "Proved on a GPU")."""

from __future__ import annotations

import mmap
import os
import shutil
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest
import torch

from grader.containment import gpu
from grader.containment.worker import Worker
from grader.judge.inprocess import InProcess
from grader.paths import KIT_ROOT
from grader.selfproof.hostile import check, load
from _workers import call
from _workers import package  # noqa: F401 - fixture

NO_NVML = "import sys; sys.modules['pynvml'] = None\n"


def test_pinned_host_bytes_counts_shared_dev_zero_mappings_only():
    me = {os.getpid()}
    before = gpu.pinned_host_bytes(me)
    private = mmap.mmap(-1, 8 << 20, flags=mmap.MAP_PRIVATE)  # pageable memory: not counted
    assert gpu.pinned_host_bytes(me) == before
    with open("/dev/zero", "r+b") as zero:
        shared = mmap.mmap(zero.fileno(), 4 << 20, flags=mmap.MAP_SHARED)  # how CUDA maps pinned memory
    assert gpu.pinned_host_bytes(me) == before + (4 << 20)
    shared.close()
    private.close()
    assert gpu.pinned_host_bytes(me) == before


def test_pinned_host_bytes_of_a_gone_process_is_zero():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert gpu.pinned_host_bytes({child.pid}) == 0


def test_without_nvml_every_reading_is_none_with_a_reason(tmp_path):
    (tmp_path / "sitecustomize.py").write_text(NO_NVML)
    probe = ("from grader.containment import gpu\n"
             "result, activity = gpu.activity(lambda: 42, gpu.idle_watts(0.01))\n"
             "print(gpu.unavailable()); print(gpu.device_bytes({1}), result, activity)\n")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{KIT_ROOT}"})
    assert done.returncode == 0, done.stderr
    reason, values = done.stdout.strip().splitlines()
    assert "nvidia-ml-py" in reason
    assert values == "None 42 None"


class FakeNvml:
    """NVML as the readings use it: device 0 lists ``listed`` (pid -> device bytes) as its compute processes, reads
    40% utilization (``polls`` times, refused after ``answered`` polls) and has drawn no energy."""

    NVMLError = RuntimeError

    def __init__(self, listed: dict[int, int]) -> None:
        self.listed = listed
        self.inits = self.polls = 0
        self.answered: int | None = None

    def nvmlInit(self) -> None:
        self.inits += 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[SimpleNamespace]:
        return [SimpleNamespace(pid=pid, usedGpuMemory=used) for pid, used in self.listed.items()]

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        self.polls += 1
        if self.answered is not None and self.polls > self.answered:
            raise self.NVMLError("refused")
        return SimpleNamespace(gpu=40)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        return 0


@pytest.fixture
def fake_nvml(monkeypatch):
    """A fake NVML in this process, looked up afresh; ``listed`` says what it lists."""
    fake = FakeNvml({})
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(gpu, "_FOUND", {})
    return fake


@pytest.mark.skipif(sys.platform != "linux", reason="the sandbox's containment is Linux's")
def test_a_worker_s_gpu_readings_are_its_own_processes_read_from_outside(package, fake_nvml):
    worker = Worker(package)
    try:
        call(worker, "ok")
        fake_nvml.listed.update({worker.worker_pid(): 3 << 30, os.getpid(): 5 << 30})  # the judge's is not its
        before = worker.measure_gpu()
        assert call(worker, "pin", 4) == 1
        after = worker.measure_gpu()
        assert (after.device_bytes, after.unavailable) == (3 << 30, "")
        assert after.pinned_host_bytes - before.pinned_host_bytes == 4 << 20
        assert fake_nvml.inits == 1  # NVML looked up once, for every reading
    finally:
        worker.close()
    assert worker.measure_gpu() is None


@pytest.mark.parametrize("answered", [None, 2])
def test_the_utilization_is_polled_while_the_call_runs_until_nvml_refuses(fake_nvml, answered):
    fake_nvml.answered = answered
    result, activity = gpu.activity(lambda: time.sleep(0.2) or 42, 1.0)
    assert result == 42 and activity.utilization == 40 and activity.seconds >= 0.2
    assert activity.joules == pytest.approx(-activity.seconds)  # no energy drawn, 1 W idle subtracted
    assert fake_nvml.polls >= 3 if answered is None else fake_nvml.polls == answered + 1, fake_nvml.polls


def test_in_process_the_gpu_readings_are_the_judge_s_own(package, fake_nvml):
    fake_nvml.listed.update({os.getpid(): 5 << 30, 1: 3 << 30})
    backend = InProcess(package)
    try:
        usage = backend.measure_gpu()
    finally:
        backend.close()
    assert (usage.device_bytes, usage.unavailable) == (5 << 30, "")
    assert usage.pinned_host_bytes == gpu.pinned_host_bytes({os.getpid()})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal without CUDA")
def test_attacks_on_gpu_tests_are_not_run_without_cuda(capsys):
    assert {a.id for a in load() if a.gpu} >= {"p4-gpu-timer-sleeps", "p6-gpu-pinned-counter-forged",
                                               "p8-gpu-activations-offloaded"}
    assert check.main(gpu=True) == 2
    assert "not run: needs a GPU" in capsys.readouterr().out


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed")
def test_gpu_runner_script_passes_shellcheck():
    done = subprocess.run(["shellcheck", str(KIT_ROOT / "grader" / "bench" / "gpu_runner.sh")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


def test_gpu_runner_class_step_lays_out_its_three_submissions(tmp_path):
    """The runner's Python (its class step) runs here too: the names it imports from the kit exist."""
    script = (KIT_ROOT / "grader" / "bench" / "gpu_runner.sh").read_text()
    program = script.split("<<'EOF'\n", 1)[1].split("\nEOF\n", 1)[0]
    done = subprocess.run([sys.executable, "-", str(tmp_path)], input=program, capture_output=True, text=True,
                          cwd=KIT_ROOT, env={**os.environ, "PYTHONPATH": str(KIT_ROOT)})
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mutant", "reference", "stubs"]
    assert all((tmp_path / name / "assignment" / "optim.py").is_file() for name in ("mutant", "reference", "stubs"))
