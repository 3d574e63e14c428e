"""A single grading's own worker template (``template.own``): started on the first worker that can fork, not
before (a worker without library code, as P5's, starts cold and starts none), shared by the later workers
(P7's fresh loader among them, also when it starts at the same time as the shared worker), stopped with its
folder at the block's end; outside the block, workers start cold. A template removes its own folder when its
owner is gone."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from _workers import call, package  # noqa: F401 - package: a fixture

from grader.confined.config import Withheld
from grader.containment import template
from grader.containment.limits import Limits
from grader.containment.worker import Worker
from grader.forks import Forked

pytestmark = pytest.mark.skipif(not template.usable(), reason="workers are forked only as root, with bubblewrap")
FORKED = "forked from a warm template"
WITHHELD = Withheld(covers={}, kernels=(), rule="withheld in this test")


@pytest.fixture(autouse=True)
def no_shared_template(monkeypatch):
    """As in a single grading: no template of ``KIT_WARM_WORKERS`` serves this process."""
    monkeypatch.delenv(template.ADDRESS, raising=False)
    monkeypatch.setattr(template, "_connection", None)
    monkeypatch.setattr(template, "_tried", False)


def test_workers_of_a_block_fork_from_one_template_started_on_first_need(package):
    limits = Limits(memory_bytes=1536 << 20, processes=64)
    with template.own():
        alone = Worker(package, limits).sibling(WITHHELD)  # as P5's: first, cold, and no template yet
        assert call(alone, "ok", 1) == 1
        assert FORKED not in alone.isolation["processes"] and template._owned is None
        alone.close()
        shared = Worker(package, limits)
        assert call(shared, "ok", 2) == 2
        owned = template._owned
        folder = Path(owned.path).parent
        loader = shared.sibling()  # as P7's fresh loader
        assert call(loader, "ok", 3) == 3
        for worker in (shared, loader):
            assert isinstance(worker._run.proc, Forked) and FORKED in worker.isolation["processes"]
        assert template._owned is owned  # one template for the block
        loader.close()
        shared.close()
    assert owned.process.poll() is not None and not folder.exists()
    assert template._owned is None and template.connection() is None


def test_workers_started_at_once_fork_from_one_template(package, monkeypatch):
    """P7's fresh loader starts in a thread of its own while the shared worker starts: one template serves both
    (two would each hold an import of torch)."""
    started, real = [], template.Template

    def slow_template(folder: Path) -> template.Template:
        started.append(folder)
        time.sleep(0.5)  # the other thread asks while this template starts
        return real(folder)

    monkeypatch.setattr(template, "Template", slow_template)
    limits = Limits(memory_bytes=1536 << 20, processes=64)
    workers, started_all, done = [Worker(package, limits) for _ in range(2)], threading.Barrier(3), threading.Event()

    def start(worker: Worker) -> None:
        try:
            worker.start(30)
        finally:
            started_all.wait()
            done.wait()  # a worker dies with the thread that started it (bubblewrap's --die-with-parent)

    with template.own():
        threads = [threading.Thread(target=start, args=(worker,)) for worker in workers]
        for thread in threads:
            thread.start()
        try:
            started_all.wait()
            assert [call(worker, "ok", n) for n, worker in enumerate(workers)] == [0, 1]
            assert len(started) == 1
            assert all(FORKED in worker.isolation["processes"] for worker in workers)
        finally:
            for worker in workers:
                worker.close()
            done.set()
            for thread in threads:
                thread.join()


def test_outside_the_block_workers_start_cold(package):
    worker = Worker(package, Limits(memory_bytes=1536 << 20, processes=64))
    try:
        assert call(worker, "ok", 4) == 4
        assert FORKED not in worker.isolation["processes"] and template._owned is None
    finally:
        worker.close()
    assert os.environ.get(template.ADDRESS) is None


def test_a_template_removes_its_folder_when_its_owner_is_gone(tmp_path):
    """A judge killed in the middle of a grading leaves no template folder behind: once the owner's end of its
    stdin is closed (as at the owner's death) and its workers have ended, the template removes it."""
    folder = tmp_path / "workers"
    started = template.Template(folder)
    assert (folder / "socket").exists()
    started.stop()
    assert started.process.returncode == 0 and not folder.exists()
