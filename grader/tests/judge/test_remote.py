"""The remote-object protocol: the judge drives objects the worker holds, by handle.

Each test runs on every backend (the sandboxed worker, the worker where no namespace can be
made, and the in-process debugging backend), so they cannot drift apart.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch

from grader import wire
from grader.containment.limits import Limits
from grader.containment.worker import Worker
from grader.judge.inprocess import InProcess
from grader.judge.handle import StudentError, Submission

TRICKS = '''
import torch


class Counter:
    def __init__(self, start=0):
        self.n = start

    def bump(self, by=1):
        self.n += by
        return self.n


def twice(function, x):
    return 2 * function(x)


kept = []


def keep(function, x=None):
    kept.append(function)
    return None if x is None else function(x)


def call_kept(x):
    return kept[-1](x)


def exit_now():
    import os
    os._exit(3)


def spin_for(seconds):
    import time
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
    return seconds


class Honest(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad, alpha=-group["lr"])
        return loss


class Computed(Honest):
    def step(self, closure=None):
        return getattr(torch.optim, "S" + "GD")(self.param_groups[0]["params"], lr=0.1).step(closure)


class Fused(Honest):
    @torch.no_grad()
    def step(self, closure=None):
        params = [p for p in self.param_groups[0]["params"] if p.grad is not None]
        torch._foreach_add_(params, [p.grad for p in params], alpha=-0.1)


class Inherited(torch.optim.SGD):
    pass
'''
DELEGATION = ["torch.optim.SGD.__init__", "torch.optim.SGD.step", "torch._foreach_*"]


@pytest.fixture(scope="module", params=["worker", "no-namespaces", "in-process"])
def sub(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("remote") / "assignment"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "tricks.py").write_text(TRICKS)
    backend = (InProcess(folder) if request.param == "in-process" else
               Worker(folder, Limits(namespaces=request.param == "worker")))
    yield Submission(backend, folder)
    backend.close()


def test_objects_live_in_the_worker_and_are_driven_by_handle(sub):
    counter = sub.new("tricks.Counter", 5)
    assert counter.call("bump") == 6 and counter.call("bump", by=4) == 10
    assert counter.get("n") == 10
    counter.set("n", -1)
    assert counter.call("bump") == 0


def test_library_objects_tensors_and_kept_results(sub):
    x = sub.lib("torch.arange", 6.0)
    view = x.call("view", 2, 3, keep=True)
    view.call("mul_", 10)  # through the view, into x's storage
    assert torch.equal(x.read(), torch.arange(6.0) * 10)
    assert view.call("stride") == (3, 1) and view.call("dim") == 2
    listed = sub.lib("builtins.list", [x, view])  # handles inside arguments name the objects again
    assert listed.call("__len__") == 2


def test_a_released_handle_is_gone(sub):
    counter = sub.new("tricks.Counter")
    counter.release()
    with pytest.raises(StudentError, match="not held"):
        counter.call("bump")


def test_callbacks_run_in_the_judge_and_may_call_back_into_the_worker(sub):
    counter = sub.new("tricks.Counter", 100)
    seen = []

    def judge_side(x):
        seen.append(x)
        return x + counter.call("bump")  # a nested request while the worker waits in the callback

    assert sub.call("tricks.twice", sub.callback(judge_side), 1) == 2 * (1 + 101)
    assert seen == [1]


def test_a_failing_callback_fails_the_test_in_the_judge(sub):
    def broken(x):
        raise AssertionError("the judge's own check failed")

    with pytest.raises(AssertionError, match="judge's own check"):
        sub.call("tricks.twice", sub.callback(broken), 1)


def test_a_callback_is_refused_after_its_call_returned(sub):
    seen = []
    sub.call("tricks.keep", sub.callback(seen.append))  # e.g. registered as a hook, called later
    with pytest.raises(StudentError, match="outside the call it was passed to"):
        sub.call("tricks.call_kept", 1)
    assert seen == []


def test_a_callback_is_refused_in_a_call_nested_in_its_own(sub):
    def judge_side(x):
        return sub.call("tricks.call_kept", x)  # the worker calls the outer call's callback again

    with pytest.raises(StudentError, match="outside the call it was passed to"):
        sub.call("tricks.keep", sub.callback(judge_side), 1)


def test_a_callback_passed_to_a_second_call_is_a_grading_error(sub):
    callback = sub.callback(lambda x: x)
    assert sub.call("tricks.twice", callback, 3) == 6
    with pytest.raises(ValueError, match="second call"):
        sub.call("tricks.twice", callback, 3)


def test_an_optimizer_stepped_with_a_judge_closure(sub):
    p = sub.lib("torch.nn.Parameter", torch.tensor([1.0, -2.0]))
    optimizer = sub.new("tricks.Honest", [p], lr=0.5)

    def closure():
        value = p.read()
        p.set("grad", 2 * value)  # the gradient of |p|^2, computed in the judge
        return (value ** 2).sum()

    loss = optimizer.call("step", sub.callback(closure))
    assert torch.equal(loss, torch.tensor(5.0))
    assert torch.equal(p.read(), torch.tensor([0.0, 0.0]))


@pytest.mark.parametrize("kind", ["Computed", "Fused", "Inherited"])
def test_delegation_is_caught_while_it_runs(sub, kind):
    p = sub.lib("torch.nn.Parameter", torch.ones(3))
    p.set("grad", torch.ones(3))
    optimizer = sub.new(f"tricks.{kind}", [p], lr=0.1)
    with sub.forbidding(DELEGATION, "write the update yourself"):
        with pytest.raises(StudentError, match="write the update yourself"):
            optimizer.call("step")
    optimizer.call("step")  # disarmed again: the same call is allowed outside the block


def test_an_honest_optimizer_passes_the_delegation_check(sub):
    p = sub.lib("torch.nn.Parameter", torch.ones(3))
    p.set("grad", torch.ones(3))
    optimizer = sub.new("tricks.Honest", [p], lr=0.5)
    with sub.forbidding(DELEGATION, "write the update yourself"):
        optimizer.call("zero_grad")  # torch's own code may use what the submission may not
        p.set("grad", torch.ones(3))
        optimizer.call("step")
    assert torch.equal(p.read(), torch.full((3,), 0.5))


def test_a_paused_call_stops_the_worker_or_is_refused_in_process(sub):
    """Containment stops and continues the worker while one call runs, on the judge's schedule, and says for how
    much of the call: the worker ran its CPU time in what was left. The judge cannot stop its own process: in
    process a paused call fails."""
    spin = lambda: sub.call("tricks.spin_for", 0.1)  # noqa: E731
    if isinstance(sub.backend, InProcess):
        with pytest.raises(StudentError, match="cannot stop"):
            sub.paused_call(spin, 0.029, 0.08)
        return
    begin = time.perf_counter()
    value, share = sub.paused_call(spin, 0.029, 0.08)
    wall = time.perf_counter() - begin
    assert value == 0.1 and 0.5 < share <= 0.99, share
    assert (1 - share) * wall >= 0.095, (share, wall)  # one thread ran 0.1 s of CPU time while not stopped


def test_handles_do_not_survive_a_restart(tmp_path):
    folder = tmp_path / "assignment"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "tricks.py").write_text(TRICKS)
    backend = Worker(folder, Limits())
    try:
        sub = Submission(backend, folder)
        counter = sub.new("tricks.Counter")
        with pytest.raises(StudentError, match="died"):
            sub.call("tricks.exit_now")
        with pytest.raises(StudentError, match="restarted"):
            counter.call("bump")
        assert sub.new("tricks.Counter", 1).call("bump") == 2
    finally:
        backend.close()


def test_handles_cross_the_wire_as_numbers_only():
    for value in (wire.Ref(3), wire.Callback(0)):
        assert wire.decode(wire.encode(value)) == value
    for bad in ({"$t": "ref", "id": -1}, {"$t": "ref", "id": "3"}, {"$t": "callback"}):
        with pytest.raises(wire.WireError):
            wire.decode(bad)


def test_the_judge_can_measure_the_worker_from_outside(sub):
    pid = sub.worker_pid()
    before = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    block = sub.lib("torch.ones", 64 << 20, dtype=torch.uint8)  # 64 MiB held by the worker
    after = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    assert (after - before) * os.sysconf("SC_PAGE_SIZE") >= 60 << 20
    block.release()


def test_the_exchange_folder_is_shared_both_ways(sub):
    exchange = sub.exchange()
    (exchange.host / "in.txt").write_text("from the judge")
    text = sub.lib("pathlib.Path", exchange.path("in.txt")).call("read_text")
    assert text == "from the judge"
    sub.lib("pathlib.Path", exchange.path("out.txt")).call("write_text", "from the worker")
    assert (exchange.host / "out.txt").read_text() == "from the worker"
