"""What the judge counts of memory a worker keeps outside its processes' pages (``Worker.measure`` and
``Worker.measure_files``): kernel buffers of pipes and sockets, which its cgroup charges and the watchdog's
count of its processes cannot see (P8 awards its memory point only where they are counted), and files it
wrote in the exchange folder through a shared mapping, which pass no write(2) and, once unmapped, are page
cache no process maps."""

from __future__ import annotations

import sys

import pytest

from grader.containment import cgroup as cgroups
from grader.containment.limits import Limits
from grader.containment.worker import Worker
from _workers import call, package  # noqa: F401 - fixture

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox's containment is Linux's")

MIB = 1 << 20


@pytest.fixture
def measured(package, request):
    """A worker of its own, with a cgroup (where the host gives one) or without."""
    if not request.param:
        patch = pytest.MonkeyPatch()
        patch.setattr(cgroups, "create", lambda *args: None)
        request.addfinalizer(patch.undo)
    worker = Worker(package, Limits(memory_bytes=1 << 30, processes=64))
    call(worker, "ok")
    yield worker
    worker.close()


@pytest.mark.parametrize("measured", [True], indirect=True, ids=["cgroup"])
@pytest.mark.parametrize("kind", ["pipes", "sockets"])
def test_a_cgroup_counts_what_pipes_and_sockets_hold(measured, kind):
    if not measured.measure().source.startswith("cgroup"):
        pytest.skip("this host gives the worker no cgroup")
    before = measured.measure().memory_bytes
    held = call(measured, "park", kind, 48, timeout=60)
    grown = measured.measure().memory_bytes - before
    call(measured, "unpark")
    assert grown >= 0.8 * held, f"{held / MIB:.0f} MiB held in {kind}, the cgroup's count grew by {grown / MIB:.1f} MiB"


@pytest.mark.parametrize("measured", [False], indirect=True, ids=["watchdog"])
def test_the_watchdog_does_not_see_them_so_it_says_so(measured):
    # Why P8 awards its memory point only under a cgroup: the watchdog's figure misses kernel buffers.
    assert measured.measure().source == "process tree"
    before = measured.measure().memory_bytes
    held = call(measured, "park", "pipes", 48, timeout=60)
    grown = measured.measure().memory_bytes - before
    call(measured, "unpark")
    assert grown < 0.5 * held


@pytest.mark.parametrize("measured", [True, False], indirect=True, ids=["cgroup", "watchdog"])
@pytest.mark.parametrize("named", [True, False], ids=["named-and-closed", "unnamed-and-open"])
def test_files_written_through_a_shared_mapping_are_counted(measured, named):
    before = measured.measure_files()
    mib = call(measured, "mapped_file", named, 32, timeout=60)
    grown = measured.measure_files() - before
    call(measured, "unpark")
    assert grown >= mib * MIB, f"{mib} MiB written through a mapping, the worker's files grew by {grown / MIB:.1f} MiB"
