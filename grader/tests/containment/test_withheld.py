"""P5's worker runs without torch's optimizers (grader/judge/drivers/optim_stubs.py, grader/confined/kernels.py):
what its files and kernels give to code that looks for them, under each confinement that has its own root, and
that nothing of the kit (its modules, the registrations that withhold the kernels) is there for it to import,
find or release."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest
import torch

from grader import wire
from grader.containment import bubblewrap
from grader.containment.limits import Limits
from grader.containment.worker import Worker
from grader.judge.drivers import optim_stubs
from _workers import a_package

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the sandbox's containment is Linux's")

LOOK = '''
import gc
import pydoc
import sys
import weakref
from pathlib import Path

import torch


def _raises(function):
    try:
        function()
    except Exception as exc:  # noqa: BLE001 - what it raised is the answer
        return type(exc).__name__
    return "ran"


def _release_every_library():
    """End every operator registration Python can reach: each library's finalizer, each library the collector
    finds."""
    for finalizer, info in list(weakref.finalize._registry.items()):
        if info.func.__name__ == "_del_library":
            finalizer()
    for held in gc.get_objects():
        if isinstance(held, torch.library.Library):
            held._destroy()


def look():
    p, g = torch.zeros(3, requires_grad=True), torch.ones(3)
    folder = Path(torch.__file__).parent / "optim"
    return {
        "sgd text": (folder / "sgd.py").read_text(),
        "compiled": sorted(path.stat().st_size for path in folder.glob("__pycache__/sgd.*.pyc")),
        "SGD": _raises(lambda: torch.optim.SGD([p], lr=0.1)),
        "located": _raises(lambda: pydoc.locate("torch.optim.Adagrad")([p])),
        "functional": _raises(lambda: torch.optim._functional.sgd([p], [g], [None], weight_decay=0.0, momentum=0.0,
                                                                  lr=0.1, dampening=0.0, nesterov=False,
                                                                  maximize=False)),
        "fused": _raises(lambda: torch._fused_sgd_([p.detach()], [g], [], weight_decay=0.0, momentum=0.0, lr=0.1,
                                                   dampening=0.0, nesterov=False, maximize=False,
                                                   is_first_step=True)),
        "foreach": _raises(lambda: torch.ops.aten._foreach_add_.List([p.detach()], [g])),
        "own optimizer": _raises(lambda: type("Mine", (torch.optim.Optimizer,), {})([p], {"lr": 0.1})),
        "plain ops": (p.detach() + 2 * g).tolist(),
        "kit modules": sorted(name for name, module in sys.modules.items()
                              if Path(getattr(module, "__file__", None) or "/").parent.name == "_kit"),
        "kit on the path": [entry for entry in sys.path if Path(entry).name == "_kit"],
        "import kernels": _raises(lambda: __import__("kernels")),
        "fused, every library released": _raises(lambda: (_release_every_library(), torch.ops.aten._fused_sgd_(
            [p.detach()], [g], [], weight_decay=0.0, momentum=0.0, lr=0.1, dampening=0.0, nesterov=False,
            maximize=False, is_first_step=True))),
    }
'''


def test_a_stub_keeps_every_name_and_runs_nothing():
    text = (Path(torch.optim.__file__).parent / "sgd.py").read_text()
    stub = optim_stubs.stub(text, "torch.optim.sgd")
    defined = {node.name for node in ast.parse(stub).body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert {"SGD", "sgd", "_single_tensor_sgd", "_multi_tensor_sgd", "_fused_sgd"} <= defined
    namespace: dict = {"__name__": "torch.optim.sgd", "__package__": "torch.optim"}
    exec(compile(stub, "sgd.py", "exec"), namespace)  # the stub itself, run here: it defines, never updates
    assert issubclass(namespace["SGD"], torch.optim.Optimizer)
    with pytest.raises(RuntimeError, match="written from scratch"):
        namespace["SGD"]([torch.zeros(2, requires_grad=True)], lr=0.1)
    bodies = [node.body for node in ast.walk(ast.parse(stub)) if isinstance(node, ast.FunctionDef)]
    assert bodies and all(len(body) == 1 and isinstance(body[0], ast.Raise) for body in bodies)


@pytest.mark.parametrize("confinement", ["bubblewrap", "hand-written namespaces"])
def test_the_withholding_worker_reads_and_reaches_only_stubs(tmp_path, confinement):
    if bubblewrap.why_not_usable():
        pytest.skip(bubblewrap.why_not_usable())
    # the audit hook off: the probe walks the collector and finalizers, to show the withholding has no handle even so
    limits = Limits(memory_bytes=1536 << 20, processes=64, bubblewrap=confinement == "bubblewrap", code_by_name=False)
    worker = Worker(a_package(tmp_path, look=LOOK), limits, withheld=optim_stubs.withheld())
    try:
        answer = worker.request({"$type": "call", "id": 1, "target": "look.look", "args": wire.encode([]),
                                 "kwargs": wire.encode({})}, 60)
        seen = wire.decode(answer["value"])
        assert worker.isolation["mechanism"].startswith(confinement)
        assert "covered by stubs" in worker.isolation["withheld files"]
    finally:
        worker.close()
    assert seen["sgd text"] == optim_stubs.stub((Path(torch.optim.__file__).parent / "sgd.py").read_text(),
                                                "torch.optim.sgd")
    assert set(seen["compiled"]) <= {0}
    assert seen["SGD"] == seen["located"] == seen["functional"] == "RuntimeError"
    assert seen["fused"] == seen["foreach"] == "Withheld"
    assert seen["own optimizer"] == "ran" and seen["plain ops"] == [2.0, 2.0, 2.0]
    assert seen["kit modules"] == seen["kit on the path"] == [] and seen["import kernels"] == "ModuleNotFoundError"
    assert seen["fused, every library released"] == "Withheld"  # no Python object holds the withholding
