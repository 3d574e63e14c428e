"""What the NVIDIA driver and the kernel show from outside about a process using the GPU.

The GPU tests back three in-process figures with readings taken from outside the worker (P4: the
GPU was busy while a timed call ran; P6: a pinned host buffer appeared; P8: device memory held).
This measures, on a real GPU, what those readings can see: a child process does each piece of
work between two marks it prints, and this process reads NVML (device and per-process
utilization, per-process device memory) and the child's ``/proc/<pid>/maps`` and ``status``
around each mark::

    python -m grader.bench.gpu_readings [--seconds 1.5]

It prints one JSON object per case; exit 2 without CUDA or without nvidia-ml-py.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from grader.bench import records

CHILD = r"""
import sys, time, torch
case, seconds = sys.argv[1], float(sys.argv[2])
def mark(name):
    torch.cuda.synchronize(); print(name, time.time(), flush=True); sys.stdin.readline()
torch.zeros(1, device="cuda"); mark("ready")
if case in ("busy", "sleep"):
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
    a @ b; mark("start")
    end = time.time() + seconds
    if case == "busy":
        while time.time() < end:
            for _ in range(20): a @ b
            torch.cuda.synchronize()
    else:
        a @ b; torch.cuda.synchronize(); time.sleep(seconds)
    mark("stop")
elif case == "memory":
    x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda"); mark("allocated 1 GiB")
    del x; torch.cuda.empty_cache(); mark("freed")
elif case == "pinned":
    y = torch.arange(512).to("cuda"); mark("pageable copy 4 KiB")
    z = torch.arange(512).pin_memory().to("cuda", non_blocking=True); mark("pinned copy 4 KiB")
    w = torch.empty(64 << 20, dtype=torch.uint8).pin_memory(); mark("pinned 64 MiB")
print("done", time.time(), flush=True)
"""


def _nvml():
    import pynvml
    pynvml.nvmlInit()
    return pynvml, pynvml.nvmlDeviceGetHandleByIndex(0)


def _maps(pid: int) -> dict[str, int]:
    """Each mapping of ``pid`` (address range -> size in bytes, with its path)."""
    out = {}
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        parts = line.split()
        start, end = (int(v, 16) for v in parts[0].split("-"))
        out[f"{parts[0]} {parts[1]} {parts[5] if len(parts) > 5 else '[anon]'}"] = end - start
    return out


def _pinned_flags(pid: int) -> list[str]:
    """The size and VmFlags of each shared /dev/zero mapping of ``pid`` (where CUDA maps pinned memory)."""
    found, current = [], None
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if fields and "-" in fields[0] and ":" not in fields[0]:
            current = line if len(fields) == 6 and fields[1].endswith("s") and fields[5].startswith("/dev/zero") else None
        elif current and fields[0] == "VmFlags:":
            found.append(f"{current.split()[0]} {' '.join(fields[1:])}")
    return found


def _status(pid: int) -> dict[str, str]:
    keep = ("VmRSS", "VmLck", "VmPin", "RssFile", "RssShmem", "RssAnon")
    return {k: v.strip() for k, v in (line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
            if k in keep}


def _process_memory(nvml, handle, pid: int) -> int | None:
    try:
        return next((p.usedGpuMemory for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle) if p.pid == pid), None)
    except nvml.NVMLError as exc:
        return f"NVMLError: {exc}"


def _process_utilization(nvml, handle, pid: int, since_us: int):
    try:
        return [(s.timeStamp, s.smUtil, s.memUtil) for s in nvml.nvmlDeviceGetProcessUtilization(handle, since_us)
                if s.pid == pid]
    except nvml.NVMLError as exc:
        return f"NVMLError: {exc}"


def _device_samples(nvml, handle, since_us: int):
    try:
        kind, samples = nvml.nvmlDeviceGetSamples(handle, nvml.NVML_GPU_UTILIZATION_SAMPLES, since_us)
        return [(s.timeStamp, s.sampleValue.uiVal) for s in samples]
    except nvml.NVMLError as exc:
        return f"NVMLError: {exc}"


def run_case(case: str, seconds: float) -> dict:
    nvml, handle = _nvml()
    child = subprocess.Popen([sys.executable, "-c", CHILD, case, str(seconds)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    polled: list[tuple[float, int]] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            polled.append((time.time(), nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
            time.sleep(0.01)

    sampler = threading.Thread(target=poll, daemon=True)
    sampler.start()
    marks, maps, found = [], _maps(child.pid) if child.poll() is None else {}, {"case": case}
    try:
        energy0 = nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except nvml.NVMLError:
        energy0 = None
    for line in child.stdout:
        name, stamp = line.rsplit(" ", 1)
        now_maps = _maps(child.pid)
        added = {k: v for k, v in now_maps.items() if k not in maps}
        maps = now_maps
        entry = {"mark": name, "t": float(stamp), "process_memory": _process_memory(nvml, handle, child.pid),
                 "status": _status(child.pid),
                 "maps_added": {k: v for k, v in sorted(added.items(), key=lambda kv: -kv[1])[:12]},
                 "maps_added_bytes": sum(added.values()), "pinned_flags": _pinned_flags(child.pid)}
        if energy0 is not None:
            entry["energy_mJ"] = nvml.nvmlDeviceGetTotalEnergyConsumption(handle) - energy0
        marks.append(entry)
        if name == "done":
            break
        child.stdin.write("\n")
        child.stdin.flush()
    child.wait(timeout=60)
    stop.set()
    sampler.join()
    found["marks"] = marks
    start = next((m["t"] for m in marks if m["mark"] == "start"), None)
    stop_t = next((m["t"] for m in marks if m["mark"] == "stop"), None)
    if start is not None and stop_t is not None:
        inside = [u for t, u in polled if start <= t <= stop_t]
        found["polled_utilization_mean"] = sum(inside) / len(inside) if inside else None
        found["polled_count"] = len(inside)
        since = int(start * 1e6)
        found["device_samples"] = _device_samples(nvml, handle, since)[:40]
        found["process_samples"] = _process_utilization(nvml, handle, child.pid, since)
        found["window_s"] = stop_t - start
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=1.5, help="how long the busy and the sleeping cases last")
    args = parser.parse_args(argv)
    run = records.start("gpu_readings", argv)
    try:
        import pynvml  # noqa: F401
        import torch
    except ImportError as exc:
        print(f"gpu_readings: {exc}", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("gpu_readings: no CUDA device here", file=sys.stderr)
        return 2
    rows = {}
    for case in ("busy", "sleep", "memory", "pinned"):
        found = run_case(case, args.seconds)
        print(json.dumps(found, default=str), flush=True)
        rows[case] = {key: value for key, value in found.items() if isinstance(value, (int, float, str))}
    run.write("what NVML and /proc show from outside a process using the GPU", {"cases": len(rows)}, rows=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
