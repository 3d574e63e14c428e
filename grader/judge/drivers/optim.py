"""P5's driver: one optimizer run, step by step, on either side of the trust boundary.

The problem (all of it in the judge): parameters of the given shapes drawn from a seeded CPU
generator, and a smooth non-quadratic loss per parameter, ``sum(c * (p - t)**2) + 0.1 *
sum(sin(3 p))``, whose gradient ``2 c (p - t) + 0.3 cos(3 p)`` depends on where the trajectory
is (an error at one step shows in every later one) and stays bounded (no trajectory blows up
for the learning rates the tests draw).

``run(side, kind, scenario)`` builds the parameters and the optimizer through a side, then per
step reads the parameters, computes the loss and gradients in the judge, sets ``.grad`` (None
for skipped parameters), calls ``step`` and reads the parameters back. ``WorkerSide(sub)`` drives
the submission's classes in the worker by handle; ``JudgeSide()`` drives ``torch.optim`` in the
judge (the oracle) through ``Local``: the same code, the same inputs, the same call sequence.
The wrong update rules a failing trajectory may follow are written once, as P5's mutants
(``grader/mistakes/p5_optim.toml``); the diagnosis names the one a submission's answers reproduce
(``grader.judge.diagnosis``), with its misconception and handout section.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch

from ..handle import Remote, Submission
from .sides import Local

RTOL, ATOL = 1e-5, 1e-5
TORCH_NAME = {"SGD": "torch.optim.SGD", "AdaGrad": "torch.optim.Adagrad"}
DELEGATION_RULE = ("P5 asks for SGD and AdaGrad written from scratch: while your optimizer is graded it may not "
                   "call torch.optim's SGD or Adagrad (their classes, step functions or functional forms), "
                   "torch._foreach_* kernels, or importlib.reload (see the handout, P5).")
_PRIVATE = ["sgd.sgd", "sgd._single_tensor_sgd", "sgd._multi_tensor_sgd", "sgd._fused_sgd",
            "adagrad.adagrad", "adagrad._single_tensor_adagrad", "adagrad._multi_tensor_adagrad",
            "adagrad._fused_adagrad", "_functional.sgd", "_functional.adagrad"]
# The classes by both of their names: after a reload of torch.optim.sgd, its SGD is a new class.
DELEGATION = sorted({f"torch.optim.{cls}.{method}" for cls in ("SGD", "Adagrad", "sgd.SGD", "adagrad.Adagrad")
                     for method in ("__init__", "step")}
                    | {f"torch.optim.{name}" for name in _PRIVATE}
                    | {"torch._foreach_*", "torch._fused_sgd_", "torch._fused_adagrad_", "importlib.reload"})

Handle = Any  # a handle.Remote (worker) or a drivers.Local (judge)


# -- the objective -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Scenario:
    """What one run does. groups: None (a plain list of parameters) or dicts ``{"params":
    [indices], **overrides}``; no_grad: per step, the indices whose ``.grad`` is None; zero: per
    step, the indices whose gradient is all zeros (a step like any other);
    set_to_none=False: ``zero_grad(set_to_none=False)`` in the optimizer, then the new gradient
    copied into ``p.grad`` in place (as backward accumulates); init: starting values instead
    of the drawn ones; load: a state dict handed to ``load_state_dict`` before the first step;
    frozen: the indices of parameters built with ``requires_grad=False`` (their ``.grad`` stays None)."""

    shapes: list
    hyper: dict
    steps: int
    seed: int = 0
    groups: list | None = None
    no_grad: list | None = None
    zero: list | None = None
    set_to_none: bool = True
    closure: bool = False
    init: list | None = None
    load: dict | None = None
    device: str = "cpu"
    frozen: list | None = None

    def describe(self, kind: str) -> str:
        hyper = "".join(f", {k}={v!r}" for k, v in self.hyper.items())
        groups = f", param groups {self.groups}" if self.groups else ""
        frozen = f", parameters {self.frozen} with requires_grad=False" if self.frozen else ""
        return f"{kind}(params of shapes {[tuple(s) for s in self.shapes]}{hyper}){groups}{frozen}"


class Objective:
    """The seeded parameters, targets and scales, and the loss with its gradients."""

    def __init__(self, shapes: list, seed: int) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.start, self.targets, self.scales = [], [], []
        for shape in map(tuple, shapes):
            self.start.append(torch.randn(shape, generator=generator))
            self.targets.append(torch.randn(shape, generator=generator))
            self.scales.append(0.5 + torch.rand(shape, generator=generator))

    def loss_and_gradients(self, values: list[torch.Tensor]) -> tuple[torch.Tensor, list[torch.Tensor]]:
        # enable_grad: with --in-process a closure runs inside the optimizer's own no_grad block.
        with torch.enable_grad():
            xs = [v.detach().to("cpu", torch.float32).requires_grad_() for v in values]
            loss = sum((c * (x - t) ** 2).sum() + 0.1 * torch.sin(3 * x).sum()
                       for x, t, c in zip(xs, self.targets, self.scales))
            grads = torch.autograd.grad(loss, xs)
        return loss.detach(), list(grads)


# -- the two sides -------------------------------------------------------------------------------

class WorkerSide:
    """The submission's ``optim.SGD`` / ``optim.AdaGrad``, built and driven in the worker."""

    def __init__(self, sub: Submission, device: str = "cpu") -> None:
        self.sub, self.device = sub, device

    def parameter(self, value: torch.Tensor, requires_grad: bool = True) -> Remote:
        if self.device == "cpu":
            return self.sub.lib("torch.nn.Parameter", value, requires_grad=requires_grad)
        return self.sub.lib("torch.nn.Parameter", self._moved(value), requires_grad=requires_grad)

    def optimizer(self, kind: str, spec: list, hyper: dict) -> Remote:
        optimizer = self.sub.new(f"optim.{kind}", spec, **hyper)
        assert self.ask("torch.optim.Optimizer.__instancecheck__", optimizer), (
            f"optim.{kind}(...) is not an instance of a torch.optim.Optimizer subclass")
        return optimizer

    def together(self, params: list[Remote]) -> Remote:
        """One list of the parameters, so that one read brings all of them back."""
        return self.sub.lib("builtins.list", params)

    def set_grad(self, p: Remote, g: torch.Tensor | None) -> None:
        if g is None or self.device == "cpu":
            p.set("grad", g)
        else:
            moved = self._moved(g)
            p.set("grad", moved)
            moved.release()

    def copy_grad(self, p: Remote, g: torch.Tensor) -> None:
        grad = p.get("grad", keep=True)
        grad.call("copy_", g)
        grad.release()

    def callback(self, function: Callable[[], Any]) -> Any:
        return self.sub.callback(function)

    def grad_enabled(self) -> bool:
        """``torch.is_grad_enabled()`` as the worker sees it right now (inside the student's step)."""
        return self.ask("torch.is_grad_enabled")

    def ask(self, target: str, *args: Any) -> Any:
        """The value of a library call made in the worker."""
        answer = self.sub.lib(target, *args)
        value = answer.read()
        answer.release()
        return value

    def _moved(self, value: torch.Tensor) -> Remote:
        return self.sub.lib("torch.Tensor.to", value, self.device)


class JudgeSide:
    """``torch.optim``'s classes run in the judge: the oracle."""

    def __init__(self, device: str = "cpu") -> None:
        self.classes = {"SGD": torch.optim.SGD, "AdaGrad": torch.optim.Adagrad}
        self.device = device

    def parameter(self, value: torch.Tensor, requires_grad: bool = True) -> Local:
        return Local(torch.nn.Parameter(value.to(self.device), requires_grad=requires_grad))

    def optimizer(self, kind: str, spec: list, hyper: dict) -> Local:
        return Local(self.classes[kind](_unwrap_spec(spec), **hyper))

    def together(self, params: list[Local]) -> Local:
        return Local([p.obj for p in params])

    def set_grad(self, p: Local, g: torch.Tensor | None) -> None:
        p.obj.grad = None if g is None else g.to(self.device)

    def copy_grad(self, p: Local, g: torch.Tensor) -> None:
        p.obj.grad.copy_(g)

    def callback(self, function: Callable[[], Any]) -> Any:
        return function

    def grad_enabled(self) -> bool:
        return torch.is_grad_enabled()


def _unwrap_spec(spec: list) -> list:
    return [{k: ([p.obj for p in v] if k == "params" else v) for k, v in item.items()} if isinstance(item, dict)
            else item.obj for item in spec]


# -- one run -------------------------------------------------------------------------------------

@dataclass
class Run:
    """What a run saw: per parameter its values before the first step and after each step
    (``(steps + 1, *shape)``), what each step returned, the loss the judge's closure returned
    on each call and whether gradients were enabled then, and handles to what was built."""

    params: list[torch.Tensor]
    returned: list[Any]
    losses: list[list[torch.Tensor]]
    grad_enabled: list[bool]
    closure_saw: list[list[torch.Tensor]]
    optimizer: Handle
    handles: list[Handle] = field(default_factory=list)


def run(side: WorkerSide | JudgeSide, kind: str, scenario: Scenario) -> Run:
    """Drive ``kind`` over ``scenario`` through ``side`` (see the module's docstring)."""
    objective = Objective(scenario.shapes, scenario.seed)
    frozen = set(scenario.frozen or ())
    params = [side.parameter(v, requires_grad=index not in frozen)
              for index, v in enumerate(scenario.init or objective.start)]
    if scenario.groups is None:
        spec: list = params
    else:
        spec = [{**{k: v for k, v in g.items() if k != "params"}, "params": [params[i] for i in g["params"]]}
                for g in scenario.groups]
    optimizer = side.optimizer(kind, spec, scenario.hyper)
    if scenario.load is not None:
        optimizer.call("load_state_dict", scenario.load)
    together = side.together(params)
    values = together.read()
    history = [[v] for v in values]
    has_grad = [False] * len(params)
    out = Run([], [], [], [], [], optimizer, params)

    def give_gradients(step: int, values: list[torch.Tensor]) -> torch.Tensor:
        loss, grads = objective.loss_and_gradients(values)
        skipped = (set(scenario.no_grad[step]) if scenario.no_grad else set()) | frozen
        zeros = set(scenario.zero[step]) if scenario.zero else set()
        grads = [torch.zeros_like(g) if index in zeros else g for index, g in enumerate(grads)]
        if not scenario.set_to_none:
            optimizer.call("zero_grad", set_to_none=False)
        for index, (p, g) in enumerate(zip(params, grads)):
            if index in skipped:
                side.set_grad(p, None)
            elif has_grad[index] and not scenario.set_to_none:
                side.copy_grad(p, g)  # into the zeroed p.grad, as backward accumulates
            else:
                side.set_grad(p, g)
            has_grad[index] = index not in skipped
        return loss

    for step in range(scenario.steps):
        if scenario.closure:
            out.losses.append([])
            out.closure_saw.append([])

            def closure(step: int = step) -> torch.Tensor:
                out.grad_enabled.append(side.grad_enabled())
                seen = together.read()
                out.closure_saw[step].append(seen)
                out.losses[step].append(give_gradients(step, seen))
                return out.losses[step][-1]

            out.returned.append(optimizer.call("step", side.callback(closure)))
        else:
            give_gradients(step, values)
            out.returned.append(optimizer.call("step"))
        values = together.read()
        for trace, value in zip(history, values):
            trace.append(value)
    out.params = [_stack(trace, index) for index, trace in enumerate(history)]
    return out


def _stack(trace: list, index: int) -> torch.Tensor:
    kinds = {(type(v).__name__, getattr(v, "dtype", None), tuple(getattr(v, "shape", ()))) for v in trace}
    assert len(kinds) == 1 and isinstance(trace[0], torch.Tensor), (
        f"parameter {index} changed type, dtype or shape during the run: {sorted(map(str, kinds))}")
    return torch.stack(trace)


def state_entries(run_: Run) -> list[bool]:
    """Per parameter, whether ``optimizer.state`` has an entry for it (``state.get(p)`` is not None; it
    does not create one, where reading ``state[p]`` of the defaultdict does)."""
    state = run_.optimizer.get("state", keep=True)
    entries = [state.call("get", p) is not None for p in run_.handles]
    state.release()
    return entries


def state_of(run_: Run) -> list[Any]:
    """Per parameter, ``optimizer.state.get(p)`` as data (``{}`` where it has no entry)."""
    state = run_.optimizer.get("state", keep=True)
    entries = [state.call("get", p) for p in run_.handles]
    state.release()
    return [{} if entry is None else entry for entry in entries]


def through_torch_save(state_dict: Any) -> Any:
    """``state_dict`` saved with ``torch.save`` and read back with ``torch.load(weights_only=True)``."""
    buffer = io.BytesIO()
    torch.save(state_dict, buffer)
    buffer.seek(0)
    try:
        return torch.load(buffer, weights_only=True)
    except Exception as exc:  # noqa: BLE001 - the student's state dict holds something torch refuses
        raise AssertionError(f"state_dict() holds something torch.load(weights_only=True) refuses: "
                             f"{str(exc).splitlines()[0][:200]}") from None


# -- comparing trajectories ----------------------------------------------------------------------

def mismatch(got: list[torch.Tensor], want: list[torch.Tensor], oracle: str, first_step: int = 1) -> str | None:
    """Where two trajectories first part (beyond rtol/atol): the step, the parameter, the index
    of the largest difference and both values there; None if they agree."""
    for index, (a, b) in enumerate(zip(got, want)):
        if a.shape != b.shape or a.dtype != b.dtype:
            return (f"parameter {index} came back as {a.dtype} {tuple(a.shape[1:])}, expected "
                    f"{b.dtype} {tuple(b.shape[1:])}")
        for step in range(a.shape[0]):
            if torch.allclose(a[step], b[step], rtol=RTOL, atol=ATOL):
                continue
            gap = (a[step].double() - b[step].double()).abs().nan_to_num(nan=float("inf"))
            where = tuple(int(i) for i in np.unravel_index(int(gap.flatten().argmax()), tuple(gap.shape)))
            mine, theirs = a[step][where].item(), b[step][where].item()
            when = "before the first step" if step == 0 else f"after step {step + first_step - 1}"
            return (f"{when}, parameter {index}{list(where)} is {mine!r}, {oracle} gives {theirs!r} "
                    f"(difference {abs(mine - theirs):.3g}; tolerance rtol={RTOL}, atol={ATOL})")
    return None


def assert_same_trajectory(got: Run, want: Run, kind: str, what: str, *, first_step: int = 1,
                           hint: Callable[[], str] | None = None) -> None:
    """The submission's parameters after every step within tolerance of torch.optim's; on a
    mismatch, ``hint()`` may add what the judge knows of it (a resumed run that lost its state)."""
    found = mismatch(got.params, want.params, TORCH_NAME[kind], first_step)
    if found:
        raise AssertionError(f"{what}: {found}{hint() if hint else ''}")
