"""``grader/deferred_dynamo.py``: torch.optim and torch.utils.checkpoint run without importing ``torch._dynamo``, and
the first use of anything more (compiling, importing a name it does not answer) gets the real module.

Each case runs in a fresh interpreter: ``install`` changes ``sys.modules`` and ``builtins.__import__``.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from grader.paths import GRADER

SET_UP = f"""
import sys, types
sys.path.insert(0, {str(GRADER)!r})
import torch, torch.utils.checkpoint
import deferred_dynamo
deferred_dynamo.install()
def deferred():
    return isinstance(sys.modules["torch._dynamo"], deferred_dynamo.Deferred)
"""

EAGER_WORK = """
p = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
for make in (lambda: torch.optim.SGD([p], lr=0.5, momentum=0.9), lambda: torch.optim.Adagrad([p], lr=0.5),
             lambda: torch.optim.AdamW([p], lr=0.5)):
    optimizer = make()
    p.grad = torch.tensor([1.0, 1.0])
    optimizer.step()
    optimizer.zero_grad()
    optimizer.load_state_dict(optimizer.state_dict())
q = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
q.grad = torch.tensor([1.0, 1.0])
torch.optim.SGD([q], lr=0.5).step()
assert q.tolist() == [0.5, -2.5], q
layer = torch.nn.Linear(2, 2)
x = torch.ones(3, 2, requires_grad=True)
torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False).sum().backward()
assert x.grad is not None
"""

CASES = {
    "eager work leaves it deferred": (EAGER_WORK + "assert deferred(), sys.modules['torch._dynamo']\n"
                                      "assert sorted(m for m in sys.modules if m.startswith('torch._dynamo.')) "
                                      "== ['torch._dynamo.config']\n"),
    "compiling gets the real module": (EAGER_WORK + "assert deferred()\n"
                                       "assert torch.compile(lambda a: a * 2)(torch.ones(2)).tolist() == [2.0, 2.0]\n"
                                       "assert not deferred()\n"
                                       "assert torch._dynamo.config is sys.modules['torch._dynamo.config']\n"
                                       "optimizer = torch.optim.SGD([p], lr=0.1)\n"
                                       "assert hasattr(torch.optim.Optimizer.add_param_group.__wrapped__, "
                                       "'__dynamo_disable')\n" + EAGER_WORK),
    "another name gets the real module": ("from torch._dynamo import reset\nassert not deferred()\n"
                                          "assert reset is sys.modules['torch._dynamo'].reset\n"),
    "a submodule gets the real module": ("import torch._dynamo.utils\nassert not deferred()\n"),
    "an attribute gets the real module": ("torch._dynamo.reset()\nassert not deferred()\n"),
    "the answered functions ask again": (EAGER_WORK + "fn = torch.optim.Optimizer.add_param_group.__wrapped__\n"
                                         "assert fn.__dict__['__dynamo_disable'] is fn\n"
                                         "deferred_dynamo.load_real()\n"
                                         "assert '__dynamo_disable' not in fn.__dict__\n"),
}


@pytest.mark.parametrize("case", CASES)
def test_deferred_dynamo(case: str) -> None:
    script = textwrap.dedent(SET_UP) + CASES[case]
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
