"""Public tests for P5 (optim.py): SGD and AdaGrad against torch.optim's trajectories.

Oracle: ``torch.optim.SGD`` (dampening 0, no Nesterov) and ``torch.optim.Adagrad`` (lr_decay 0)
run on an identical copy of the same model and data. Tolerance: both sides do the same few
float32 operations per step, so they agree to a few ulps per step; rtol 1e-5 / atol 1e-5 over
10 steps leaves room for a different (correct) order of operations, and is far tighter than
any real mistake (a missing weight decay or a damped first momentum step is off by ~1e-2).
"""

from __future__ import annotations

import copy
import io
from collections.abc import Callable

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from _kit import call, check_raises, check_true, complain, largest_difference

SGD_SECTION, ADAGRAD_SECTION = "optim.SGD", "optim.AdaGrad"
RTOL, ATOL = 1e-5, 1e-5


def make_model(seed: int = 0, device: str = "cpu") -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor]:
    """A small MLP and a fixed regression batch (same seed: same weights and data)."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1)).to(device)
    x, y = torch.randn(16, 5, device=device), torch.randn(16, 1, device=device)
    return model, x, y


def loss_of(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.mse_loss(model(x), y)


def train(optimizer: torch.optim.Optimizer, model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor,
          steps: int) -> list[list[torch.Tensor]]:
    """Run ``steps`` steps; returns the parameters after each one."""
    history = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss_of(model, x, y).backward()
        call(optimizer.step)
        history.append([p.detach().clone() for p in model.parameters()])
    return history


Trajectory = list[list[torch.Tensor]]


def same_trajectory(got: Trajectory, want: Trajectory) -> bool:
    return all(torch.allclose(a.cpu(), b.cpu(), rtol=RTOL, atol=ATOL) for g, w in zip(got, want) for a, b in zip(g, w))


def matching_mistakes(got: Trajectory, want: Trajectory, variants: Callable[[], dict[str, Trajectory]]) -> str:
    """The mistakes whose trajectory ``got`` follows (and torch's does not): none, one, or several. A
    mistake's trajectory may be only the first steps of one (those its behaviour determines)."""
    named = [mistake for mistake, theirs in variants().items()
             if same_trajectory(got, theirs) and not same_trajectory(want, theirs)]
    return "your steps are those of this mistake: " + "; or of: ".join(named) if named else ""


def compare(got: Trajectory, want: Trajectory, what: str, section: str, why: str = "",
            names: list[str] | None = None, variants: Callable[[], dict[str, Trajectory]] | None = None) -> None:
    """The first step and parameter where the trajectories part, with the largest difference there.

    ``variants`` (run only on a failure) gives the trajectories of well-known mistakes: the hint
    names those the student's trajectory follows, and nothing when none does."""
    for step, (g, w) in enumerate(zip(got, want), start=1):
        for number, (a, b) in enumerate(zip(g, w)):
            if not torch.allclose(a.cpu(), b.cpu(), rtol=RTOL, atol=ATOL):
                name = names[number] if names else f"parameter {number}"
                index, mine, theirs = largest_difference(a, b)
                hint = matching_mistakes(got, want, variants) if variants else ""
                complain(what, f"after step {step}, {name} (shape {tuple(a.shape)}) holds {mine:.8g} at index {index}",
                         f"{theirs:.8g} there, as torch.optim (the largest difference, {abs(mine - theirs):.3g}; "
                         f"rtol={RTOL}, atol={ATOL})", section, why, hint)


def adagrad_mistakes(kwargs: dict) -> dict[str, dict]:
    """torch.optim.Adagrad arguments that reproduce well-known AdaGrad mistakes exactly, each
    different from ``kwargs`` (the correct run) and from the others.

    eps inside the root, sqrt(sum + eps), is sqrt(sum') with sum' starting at
    initial_accumulator_value + eps, and no eps outside."""
    full = dict(dict(lr=1e-2, eps=1e-10, initial_accumulator_value=0.0, weight_decay=0.0), **kwargs)
    eps, initial = full["eps"], full["initial_accumulator_value"]
    inside, ignored = "eps inside the square root", "initial_accumulator_value ignored"
    candidates = {
        f"{inside} (PyTorch divides by sqrt(sum) + eps)": dict(full, initial_accumulator_value=initial + eps, eps=0.0),
        f"{ignored} (every state['sum'] starts at it, set in the constructor)": dict(full, initial_accumulator_value=0.0),
        f"{inside} and {ignored}": dict(full, initial_accumulator_value=eps, eps=0.0),
        "weight_decay ignored (g = p.grad + weight_decay * p)": dict(full, weight_decay=0.0),
    }
    distinct: dict[str, dict] = {}
    for mistake, arguments in candidates.items():
        if arguments != full and arguments not in distinct.values():
            distinct[mistake] = arguments
    return distinct


def sgd_mistakes(kwargs: dict, start: torch.nn.Module, want: Trajectory,
                 run: Callable[[dict], Trajectory]) -> dict[str, Trajectory]:
    """The trajectories of well-known SGD mistakes from the parameters ``start``, next to torch's run
    ``want`` with ``kwargs``: whole runs of torch.optim.SGD (``run``) where one reproduces the mistake,
    else the first steps the mistake's behaviour fixes.

    A first buffer of (1 - momentum) * g makes the first step (1 - momentum) times torch's; weight
    decay added after the buffer (p -= lr * (buf + wd * p), buf built from p.grad alone) leaves the
    first step as torch's and moves the second by lr * momentum * wd * p0."""
    full = dict(dict(lr=1e-3, momentum=0.0, weight_decay=0.0), **kwargs)
    lr, momentum, decay = full["lr"], full["momentum"], full["weight_decay"]
    p0 = [p.detach().clone() for p in start.parameters()]
    mistakes: dict[str, Trajectory] = {}
    if decay:
        mistakes["weight_decay ignored (g = p.grad + weight_decay * p)"] = run(dict(full, weight_decay=0.0))
    if momentum:
        mistakes["the first momentum buffer is (1 - momentum) * g (PyTorch starts it at g itself)"] = [
            [a + (1 - momentum) * (b - a) for a, b in zip(p0, want[0])]]
    if momentum and decay and len(want) > 1:
        mistakes["weight decay added after the momentum buffer (add weight_decay * p to g before it enters "
                 "the buffer)"] = [want[0], [b + lr * momentum * decay * a for a, b in zip(p0, want[1])]]
    return mistakes


def same_run(student_cls, torch_cls, kwargs: dict, torch_kwargs: dict | None = None, steps: int = 10,
             device: str = "cpu") -> None:
    """``student_cls(**kwargs)`` and ``torch_cls(**torch_kwargs)`` follow the same trajectory."""
    model, x, y = make_model(device=device)
    pristine = copy.deepcopy(model)
    reference = copy.deepcopy(model)
    optimizer = call(student_cls, model.parameters(), **kwargs)
    check_true(isinstance(optimizer, torch.optim.Optimizer), f"{student_cls.__name__}(params, **{kwargs})",
               type(optimizer).__name__, "an instance of a torch.optim.Optimizer subclass", f"optim.{student_cls.__name__}")
    got = train(optimizer, model, x, y, steps)
    want = train(torch_cls(reference.parameters(), **(torch_kwargs or kwargs)), reference, x, y, steps)

    def torch_run(arguments: dict) -> Trajectory:
        net = copy.deepcopy(pristine)
        return train(torch_cls(net.parameters(), **arguments), net, x, y, steps)

    def variants() -> dict[str, Trajectory]:
        if torch_cls is torch.optim.SGD:
            return sgd_mistakes(torch_kwargs or kwargs, pristine, want, torch_run)
        return {mistake: torch_run(arguments) for mistake, arguments in adagrad_mistakes(torch_kwargs or kwargs).items()}

    compare(got, want, f"{steps} steps of {student_cls.__name__}(params, **{kwargs})", f"optim.{student_cls.__name__}",
            names=[name for name, _ in model.named_parameters()], variants=variants)


# --- SGD -----------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [dict(lr=0.1), dict(lr=0.05, momentum=0.9), dict(lr=0.1, weight_decay=0.1),
                                    dict(lr=0.05, momentum=0.5, weight_decay=0.01)], ids=str)
def test_sgd_matches_torch(optim, kwargs):
    same_run(optim.SGD, torch.optim.SGD, kwargs)


def test_sgd_default_lr_is_1e_3(optim):
    same_run(optim.SGD, torch.optim.SGD, {}, dict(lr=1e-3))


@settings(max_examples=10, deadline=None)  # the hidden suite draws many more
@given(lr=st.floats(1e-4, 0.3), momentum=st.sampled_from([0.0, 0.5, 0.9, 0.99]),
       weight_decay=st.sampled_from([0.0, 1e-4, 0.1]))
def test_sgd_matches_torch_for_any_hyperparameters(optim, lr, momentum, weight_decay):
    same_run(optim.SGD, torch.optim.SGD, dict(lr=lr, momentum=momentum, weight_decay=weight_decay), steps=5)


def test_sgd_first_momentum_step_is_plain_sgd(optim):
    """With dampening 0 the buffer starts at g itself: step 1 is p - lr * g, not p - lr * (1 - m) * g."""
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    optimizer = call(optim.SGD, [p], lr=0.5, momentum=0.9)
    p.grad = torch.tensor([0.2, 0.4])
    call(optimizer.step)
    check_true(torch.allclose(p.detach(), torch.tensor([0.9, -2.2])), "SGD([p], lr=0.5, momentum=0.9).step() with "
               "p=[1, -2], grad=[0.2, 0.4]", p.detach(), "p = [0.9, -2.2] (buf = g on the first step)", SGD_SECTION)
    p.grad = torch.tensor([0.2, 0.4])
    call(optimizer.step)  # buf = 0.9 * [0.2, 0.4] + [0.2, 0.4] = [0.38, 0.76]
    check_true(torch.allclose(p.detach(), torch.tensor([0.71, -2.58])), "a second step() with the same grad",
               p.detach(), "p = [0.71, -2.58] (buf = 0.9 * buf + g = [0.38, 0.76])", SGD_SECTION)
    state = optimizer.state[p]
    check_true("momentum_buffer" in state and torch.allclose(state["momentum_buffer"], torch.tensor([0.38, 0.76])),
               "optimizer.state[p] after two steps", dict(state), "a 'momentum_buffer' equal to [0.38, 0.76]",
               SGD_SECTION)


def test_sgd_momentum_buffer_is_not_the_gradient(optim):
    """zero_grad(set_to_none=False) zeroes p.grad in place and backward accumulates into it: a
    momentum buffer that *is* p.grad (no clone) changes with it, and the trajectory leaves torch's."""
    model, x, y = make_model()
    reference = copy.deepcopy(model)
    mine = call(optim.SGD, model.parameters(), lr=0.05, momentum=0.9)
    theirs = torch.optim.SGD(reference.parameters(), lr=0.05, momentum=0.9)
    for step in range(1, 6):
        for optimizer, net in ((mine, model), (theirs, reference)):
            optimizer.zero_grad(set_to_none=False)
            loss_of(net, x, y).backward()
            call(optimizer.step)
        for (name, a), b in zip(model.named_parameters(), reference.parameters()):
            if torch.allclose(a.detach(), b.detach(), rtol=RTOL, atol=ATOL):
                continue
            buffer = mine.state[a].get("momentum_buffer")
            aliased = isinstance(buffer, torch.Tensor) and a.grad is not None and buffer.data_ptr() == a.grad.data_ptr()
            index, got, want = largest_difference(a.detach(), b.detach())
            complain("5 steps of SGD(params, lr=0.05, momentum=0.9), each after zero_grad(set_to_none=False)",
                     f"after step {step}, {name} holds {got:.8g} at index {index}", f"{want:.8g} there, as torch.optim",
                     SGD_SECTION, hint=("your momentum buffer is p.grad itself (the same memory): zero_grad and "
                                        "backward change it; start it as g.clone()") if aliased else "")


# --- AdaGrad -------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [dict(lr=0.1), dict(lr=0.1, eps=0.1), dict(lr=0.1, initial_accumulator_value=0.5),
                                    dict(lr=0.05, weight_decay=0.1, eps=1e-3)], ids=str)
def test_adagrad_matches_torch(optim, kwargs):
    same_run(optim.AdaGrad, torch.optim.Adagrad, kwargs)


def test_adagrad_defaults(optim):
    same_run(optim.AdaGrad, torch.optim.Adagrad, {}, dict(lr=1e-2, eps=1e-10))


def test_adagrad_one_step_by_hand(optim):
    """sum = 0 + g^2, p -= lr * g / (sqrt(sum) + eps): eps outside the root."""
    p = torch.nn.Parameter(torch.tensor([1.0, 1.0]))
    optimizer = call(optim.AdaGrad, [p], lr=0.5, eps=1.0)
    p.grad = torch.tensor([3.0, -1.0])
    call(optimizer.step)  # [1 - 0.5 * 3 / (3 + 1), 1 + 0.5 * 1 / (1 + 1)]
    check_true(torch.allclose(p.detach(), torch.tensor([0.625, 1.25])),
               "AdaGrad([p], lr=0.5, eps=1.0).step() with p=[1, 1], grad=[3, -1]", p.detach(),
               "p = [0.625, 1.25] = p - lr * g / (sqrt(g^2) + eps)", ADAGRAD_SECTION,
               "eps is added after the square root, as in torch.optim.Adagrad")
    check_true(torch.allclose(optimizer.state[p].get("sum", torch.zeros(2)), torch.tensor([9.0, 1.0])),
               "optimizer.state[p] after one step", dict(optimizer.state[p]), "a 'sum' equal to [9, 1]", ADAGRAD_SECTION)


@settings(max_examples=10, deadline=None)  # the hidden suite draws many more
@given(lr=st.floats(1e-3, 0.5), eps=st.sampled_from([1e-10, 1e-6, 1e-2]),
       initial=st.sampled_from([0.0, 0.1, 1.0]), weight_decay=st.sampled_from([0.0, 0.05]))
def test_adagrad_matches_torch_for_any_hyperparameters(optim, lr, eps, initial, weight_decay):
    kwargs = dict(lr=lr, eps=eps, initial_accumulator_value=initial, weight_decay=weight_decay)
    same_run(optim.AdaGrad, torch.optim.Adagrad, kwargs, steps=5)


# --- both ----------------------------------------------------------------------------------

CASES = {"SGD": ("SGD", torch.optim.SGD, dict(momentum=0.9)), "AdaGrad": ("AdaGrad", torch.optim.Adagrad, {})}


@pytest.mark.parametrize("name", CASES)
def test_per_group_hyperparameters(optim, name):
    """Each group uses its own lr; a group with lr 1e-28 does not move."""
    attr, torch_cls, extra = CASES[name]
    model, x, y = make_model()
    reference = copy.deepcopy(model)

    def groups(m):
        return [{"params": m[0].parameters(), "lr": 1e-28}, {"params": m[2].parameters(), "lr": 0.2}]

    before = [p.detach().clone() for p in model[0].parameters()]
    got = train(call(getattr(optim, attr), groups(model), lr=0.01, **extra), model, x, y, 5)
    want = train(torch_cls(groups(reference), lr=0.01, **extra), reference, x, y, 5)
    check_true(all(torch.equal(a, b) for a, b in zip(before, model[0].parameters())),
               f"{attr}([{{'params': layer0, 'lr': 1e-28}}, {{'params': layer2, 'lr': 0.2}}], lr=0.01), 5 steps",
               "layer 0 moved", "layer 0 unchanged (its group's lr is 1e-28)", f"optim.{attr}")
    compare(got, want, f"{attr} with two param groups (lr 1e-28 and 0.2), 5 steps", f"optim.{attr}")


@pytest.mark.rule("P5.skip-none-grad")
@pytest.mark.parametrize("name", CASES)
def test_params_without_grad_are_skipped(optim, name):
    attr, _, extra = CASES[name]
    a, b = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(3))
    optimizer = call(getattr(optim, attr), [a, b], lr=0.1, **extra)
    a.grad = torch.ones(3)
    call(optimizer.step)
    check_true(torch.equal(b.detach(), torch.ones(3)) and not torch.equal(a.detach(), torch.ones(3)),
               f"{attr}([a, b]).step() with a.grad set and b.grad None", (a.detach(), b.detach()),
               "a updated, b unchanged (skipped, no error)", f"optim.{attr}")


@pytest.mark.parametrize("name", CASES)
def test_step_returns_the_closure_loss(optim, name):
    """step(closure) returns exactly what the closure returned, whatever the update rule does."""
    attr, _, extra = CASES[name]
    model, x, y = make_model()
    optimizer = call(getattr(optim, attr), model.parameters(), lr=0.1, **extra)
    returned = []

    def closure():
        optimizer.zero_grad()
        loss = loss_of(model, x, y)
        if loss.requires_grad:  # else the check below explains
            loss.backward()
        returned.append(loss)
        return loss

    for step in range(1, 4):
        got = call(optimizer.step, closure)
        check_true(len(returned) == step, f"{attr}.step(closure), step {step}", f"closure called {len(returned)} times",
                   f"called {step} times in {step} steps (once per step)", f"optim.{attr}")
        same = got is returned[-1] or (isinstance(got, torch.Tensor) and torch.equal(got, returned[-1]))
        check_true(same, f"{attr}.step(closure), step {step}", got,
                   f"the tensor the closure returned ({returned[-1].item():.6f}), itself", f"optim.{attr}",
                   "step calls the closure (with gradients enabled) and returns what it returned")
        check_true(returned[-1].requires_grad, f"{attr}.step(closure)", "a loss that needs no grad",
                   "the closure runs with gradients enabled", f"optim.{attr}",
                   hint="the closure ran with gradients disabled: step runs under torch.no_grad(); call the "
                        "closure inside `with torch.enable_grad():`")
    check_true(call(optimizer.step) is None, f"{attr}.step()", "a value", "None without a closure", f"optim.{attr}")


@pytest.mark.parametrize("name", CASES)
def test_state_dict_round_trip(optim, name):
    """Save after 3 steps (torch.save, weights_only load), load into a fresh optimizer, continue: same trajectory."""
    attr, _, extra = CASES[name]
    cls = getattr(optim, attr)
    model, x, y = make_model()
    optimizer = call(cls, model.parameters(), lr=0.1, **extra)
    train(optimizer, model, x, y, 3)
    resumed_model = copy.deepcopy(model)
    buffer = io.BytesIO()
    torch.save(optimizer.state_dict(), buffer)
    buffer.seek(0)
    fresh = call(cls, resumed_model.parameters(), lr=0.1, **extra)
    call(fresh.load_state_dict, torch.load(buffer, weights_only=True))
    want = train(optimizer, model, x, y, 4)
    got = train(fresh, resumed_model, x, y, 4)
    compare(got, want, f"{attr}: state_dict() after 3 steps, loaded into a fresh {attr}, 4 more steps",
            f"optim.{attr}", "keep every per-parameter tensor in self.state[p] so that state_dict() saves it")


@pytest.mark.parametrize("name", CASES)
def test_loads_a_torch_state_dict(optim, name):
    """A state dict saved from torch.optim.SGD / Adagrad continues the same trajectory in yours."""
    attr, torch_cls, extra = CASES[name]
    # Yours is built first: a stub then fails at once, before torch.optim's first use (seconds of imports).
    call(getattr(optim, attr), [torch.nn.Parameter(torch.zeros(1))], lr=0.1, **extra)
    model, x, y = make_model()
    oracle = torch_cls(model.parameters(), lr=0.1, **extra)
    train(oracle, model, x, y, 3)
    student_model = copy.deepcopy(model)
    optimizer = call(getattr(optim, attr), student_model.parameters(), lr=0.1, **extra)
    call(optimizer.load_state_dict, copy.deepcopy(oracle.state_dict()))
    want = train(oracle, model, x, y, 4)
    got = train(optimizer, student_model, x, y, 4)
    compare(got, want, f"{attr}.load_state_dict(torch.optim.{torch_cls.__name__}(...).state_dict()), 4 more steps",
            f"optim.{attr}", "use the state keys 'momentum_buffer' / 'sum', and tolerate extra keys such as 'step'")


@pytest.mark.parametrize("attr, kwargs", [
    ("SGD", dict(lr=-0.1)), ("SGD", dict(momentum=-0.5)), ("SGD", dict(weight_decay=-1e-4)),
    ("AdaGrad", dict(lr=-0.1)), ("AdaGrad", dict(eps=-1e-10)), ("AdaGrad", dict(initial_accumulator_value=-1.0)),
    ("AdaGrad", dict(weight_decay=-0.1)),
], ids=str)
def test_bad_hyperparameters_raise(optim, attr, kwargs):
    check_raises(ValueError, getattr(optim, attr), [torch.nn.Parameter(torch.ones(2))], **kwargs)


@pytest.mark.gpu
@pytest.mark.parametrize("name", CASES)
def test_matches_torch_on_cuda(optim, name):
    """On CUDA, torch.optim uses its foreach kernels by default: the trajectories still agree."""
    attr, torch_cls, extra = CASES[name]
    same_run(getattr(optim, attr), torch_cls, dict(lr=0.05, weight_decay=0.01, **extra), device="cuda")
