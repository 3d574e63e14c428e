"""Hidden tests for P5 (optim.py): SGD and AdaGrad against torch.optim, 14 points.

Oracle: the judge runs ``grader/probes/optim.py:run`` itself on ``torch.optim.SGD`` /
``torch.optim.Adagrad`` (dampening 0, no Nesterov, lr_decay 0); the worker runs the same
function on the submission. Same seed, same shapes, same call sequence: the parameter
trajectories must agree.

Tolerance (rtol 1e-5, atol 1e-5, float32, up to 20 steps): a correct optimizer does the same
handful of float32 operations per step as torch's, possibly in another order or unfused
(``g + wd*p`` vs ``add(p, alpha=wd)``, ``p -= lr*g/d`` vs ``addcdiv_``; torch's foreach kernels
on CUDA), which differs by a few ulps per step. The probe's problem is contracting for every
drawn lr, so those differences stay small: over 300 drawn settings, an implementation written
with out-of-place ops stayed within 1e-5 * |p| + 3e-7 of torch's foreach trajectory after 20
steps (the reference matches it exactly). Real mistakes are off by 1e-4 to 1e-1 within a few
steps (a damped first momentum step by momentum * lr * g; eps inside the root, for eps >= 1e-3,
by about lr * eps / 2 per step; a lost momentum buffer or accumulator restarts the dynamics).
"""

from __future__ import annotations

import ast
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.probes import optim as probe

RTOL, ATOL = 1e-5, 1e-5
# No "explain" phase: it re-runs a failing test hundreds of times (minutes for a stub) to annotate it.
TORCH = SimpleNamespace(SGD=lambda params, **kw: torch.optim.SGD(params, **kw),
                        AdaGrad=lambda params, **kw: torch.optim.Adagrad(params, **kw))
TORCH_NAME = {"SGD": "torch.optim.SGD", "AdaGrad": "torch.optim.Adagrad"}


# --- strategies ------------------------------------------------------------------------------

def shapes(max_params: int = 3):
    """Parameter shapes: 1 to ``max_params`` tensors of 1 or 2 dims (sizes 1..5)."""
    return st.lists(st.lists(st.integers(1, 5), min_size=1, max_size=2).map(tuple), min_size=1, max_size=max_params)


def sgd_hyperparameters():
    """lr, momentum (0 or 0.1..0.95) and weight decay (0 or 1e-4..0.1): all stable on the probe's problem."""
    return st.fixed_dictionaries({
        "lr": st.floats(1e-3, 0.3),
        "momentum": st.just(0.0) | st.floats(0.1, 0.95),
        "weight_decay": st.just(0.0) | st.floats(1e-4, 0.1),
    })


def adagrad_hyperparameters():
    """lr, eps (from torch's 1e-10 to 1.0, where its place matters), initial accumulator, weight decay."""
    return st.fixed_dictionaries({
        "lr": st.floats(1e-3, 0.5),
        "eps": st.sampled_from([1e-10, 1e-8, 1e-3, 0.1, 1.0]),
        "initial_accumulator_value": st.sampled_from([0.0, 0.01, 0.5]) | st.floats(0.0, 2.0),
        "weight_decay": st.just(0.0) | st.floats(1e-4, 0.1),
    })


def kinds_and_hyperparameters():
    return st.one_of(st.tuples(st.just("SGD"), sgd_hyperparameters()),
                     st.tuples(st.just("AdaGrad"), adagrad_hyperparameters()))


# --- helpers ----------------------------------------------------------------------------------

def describe(kind: str, spec: dict) -> str:
    hyper = ", ".join(f"{k}={v!r}" for k, v in spec["hyper"].items())
    groups = f", param groups {spec['groups']}" if spec.get("groups") else ""
    return f"{kind}(params of shapes {[tuple(s) for s in spec['shapes']]}{', ' + hyper if hyper else ''}){groups}"


def assert_same_trajectory(got: dict, want: dict, what: str, *, first_step: int = 1) -> None:
    """Parameters after every step within tolerance of torch.optim's."""
    for index, (a, b) in enumerate(zip(got["params"], want["params"])):
        assert a.shape == b.shape and a.dtype == b.dtype, (
            f"{what}: parameter {index} came back as {a.dtype} {tuple(a.shape)}, expected {b.dtype} {tuple(b.shape)}")
        for step in range(a.shape[0]):
            if not torch.allclose(a[step], b[step], rtol=RTOL, atol=ATOL, equal_nan=False):
                gap = (a[step] - b[step]).abs().max().item()
                assert False, (f"{what}: after step {step + first_step - 1}, parameter {index} is "
                               f"{a[step].flatten()[:3].tolist()}..., torch.optim gives {b[step].flatten()[:3].tolist()}... "
                               f"(largest difference {gap:.3g}; tolerance rtol={RTOL}, atol={ATOL})")


def both(sub, kind: str, **spec) -> tuple[dict, dict]:
    """(the submission's run, torch.optim's run) of the same spec."""
    got = sub.probe("optim.run", kind=kind, **spec)
    assert got["is_optimizer"], f"optim.{kind}(...) is not an instance of a torch.optim.Optimizer subclass"
    return got, probe.run(TORCH, kind=kind, **spec)


# --- trajectories ----------------------------------------------------------------------------

@pytest.mark.points(2)
@given(shape_list=shapes(), hyper=sgd_hyperparameters(), seed=st.integers(0, 2**31 - 1))
def test_sgd_trajectory_matches_torch(sub, shape_list, hyper, seed):
    """SGD follows torch.optim.SGD's trajectory for any lr, momentum and weight decay."""
    spec = dict(shapes=shape_list, hyper=hyper, steps=15, seed=seed)
    got, want = both(sub, "SGD", **spec)
    assert_same_trajectory(got, want, f"15 steps of optim.{describe('SGD', spec)}")


@pytest.mark.points(2)
@given(shape_list=shapes(), hyper=adagrad_hyperparameters(), seed=st.integers(0, 2**31 - 1))
def test_adagrad_trajectory_matches_torch(sub, shape_list, hyper, seed):
    """AdaGrad follows torch.optim.Adagrad's trajectory for any lr, eps, initial accumulator and weight decay."""
    spec = dict(shapes=shape_list, hyper=hyper, steps=15, seed=seed)
    got, want = both(sub, "AdaGrad", **spec)
    assert_same_trajectory(got, want, f"15 steps of optim.{describe('AdaGrad', spec)}")


@pytest.mark.points(1)
@settings(max_examples=10)
@given(momentum=st.floats(0.1, 0.95), lr=st.floats(1e-2, 0.3), steps=st.integers(1, 4), seed=st.integers(0, 2**31 - 1))
def test_momentum_buffer(sub, momentum, lr, steps, seed):
    """SGD's momentum buffer starts at g (not (1 - m) g), lives in state['momentum_buffer'], and is not p.grad."""
    # zero_grad(set_to_none=False) zeroes the old gradients in place and backward accumulates into
    # them: a buffer that *is* p.grad (no copy) is wiped or changed behind the optimizer's back.
    spec = dict(shapes=[(3,), (2, 2)], hyper=dict(lr=lr, momentum=momentum), steps=steps, seed=seed, set_to_none=False)
    got, want = both(sub, "SGD", **spec)
    assert_same_trajectory(got, want, f"{steps} step(s) of optim.{describe('SGD', spec)} with zero_grad(set_to_none=False)")
    for index, (mine, theirs) in enumerate(zip(got["state"], want["state"])):
        buffer = mine.get("momentum_buffer")
        assert isinstance(buffer, torch.Tensor), (
            f"optim.{describe('SGD', spec)}: after {steps} step(s), optimizer.state[p{index}] has keys "
            f"{sorted(mine)}, expected a tensor under 'momentum_buffer'")
        assert torch.allclose(buffer, theirs["momentum_buffer"], rtol=RTOL, atol=ATOL), (
            f"optim.{describe('SGD', spec)}: after {steps} step(s), state[p{index}]['momentum_buffer'] is "
            f"{buffer.flatten()[:3].tolist()}..., torch.optim.SGD's is {theirs['momentum_buffer'].flatten()[:3].tolist()}... "
            "(on the first step the buffer is a copy of g)")


def group_layouts():
    """Three parameters split into 2 or 3 groups, each overriding some hyperparameters."""
    def layout(kind: str):
        hyper = sgd_hyperparameters() if kind == "SGD" else adagrad_hyperparameters()
        overrides = hyper.map(lambda h: {k: v for k, v in h.items() if k != "initial_accumulator_value"})
        partitions = st.sampled_from([[[0], [1, 2]], [[0, 1], [2]], [[2], [0], [1]]])
        return st.tuples(st.just(kind), hyper, partitions, st.lists(overrides, min_size=3, max_size=3),
                         st.lists(st.sets(st.sampled_from(["lr", "momentum", "weight_decay", "eps"])), min_size=3,
                                  max_size=3), st.integers(0, 2))
    return st.sampled_from(["SGD", "AdaGrad"]).flatmap(layout)


@pytest.mark.points(1)
@settings(max_examples=15)
@given(case=group_layouts(), seed=st.integers(0, 2**31 - 1))
def test_per_group_hyperparameters(sub, case, seed):
    """Each param group uses its own lr / momentum / weight_decay / eps; a group with lr 1e-28 does not move."""
    kind, hyper, partition, overrides, keys, frozen = case
    groups = []
    for number, indices in enumerate(partition):
        group = {"params": indices, **{k: v for k, v in overrides[number].items() if k in keys[number]}}
        if number == frozen % len(partition):
            group["lr"] = 1e-28
        groups.append(group)
    spec = dict(shapes=[(4,), (2, 3), (3,)], hyper=hyper, groups=groups, steps=8, seed=seed)
    got, want = both(sub, kind, **spec)
    assert_same_trajectory(got, want, f"8 steps of optim.{describe(kind, spec)}")
    for index in groups[frozen % len(partition)]["params"]:
        trace = got["params"][index]
        assert torch.equal(trace[-1], trace[0]), (
            f"optim.{describe(kind, spec)}: parameter {index} is in the group with lr=1e-28 and moved "
            f"(from {trace[0].flatten()[:3].tolist()} to {trace[-1].flatten()[:3].tolist()}): use each group's own lr")


@pytest.mark.points(1)
@settings(max_examples=15)
@given(case=kinds_and_hyperparameters(), pattern=st.lists(st.sets(st.integers(0, 2)), min_size=8, max_size=8),
       seed=st.integers(0, 2**31 - 1))
def test_params_without_grad_are_skipped(sub, case, pattern, seed):
    """A parameter whose .grad is None on a step is skipped: unchanged, its state untouched, no error."""
    kind, hyper = case
    if kind == "SGD":  # momentum and weight decay would move a parameter that is not skipped properly
        hyper = {**hyper, "momentum": max(hyper["momentum"], 0.5), "weight_decay": max(hyper["weight_decay"], 0.01)}
    no_grad = [sorted(s) for s in pattern]
    spec = dict(shapes=[(3,), (2, 2), (4,)], hyper=hyper, steps=8, seed=seed, no_grad=no_grad)
    got, want = both(sub, kind, **spec)
    what = f"8 steps of optim.{describe(kind, spec)} with .grad set to None for parameters {no_grad} (per step)"
    for step, skipped in enumerate(no_grad, start=1):
        for index in skipped:
            trace = got["params"][index]
            assert torch.equal(trace[step], trace[step - 1]), (
                f"{what}: parameter {index} has .grad None on step {step} and changed: skip it")
    assert_same_trajectory(got, want, what)


@pytest.mark.points(1)
@settings(max_examples=10)
@given(case=kinds_and_hyperparameters(), seed=st.integers(0, 2**31 - 1))
def test_step_calls_the_closure_and_returns_its_loss(sub, case, seed):
    """step(closure) calls the closure with gradients enabled and returns its loss."""
    kind, hyper = case
    spec = dict(shapes=[(3,), (2, 2)], hyper=hyper, steps=4, seed=seed, closure=True)
    got, want = both(sub, kind, **spec)
    what = f"optim.{describe(kind, spec)}.step(closure)"
    assert None not in got["losses"], f"{what} did not call the closure"
    assert got["returned"] == got["losses"], (
        f"{what} returned {got['returned']} over 4 steps; the closure returned {got['losses']}")
    assert_same_trajectory(got, want, f"4 steps of {what}")


@pytest.mark.points(1)
@settings(max_examples=10)
@given(case=kinds_and_hyperparameters(), seed=st.integers(0, 2**31 - 1))
def test_state_keys_hold_torchs_values(sub, case, seed):
    """state[p] holds 'momentum_buffer' (SGD, momentum > 0) or 'sum' (AdaGrad), equal to torch.optim's."""
    kind, hyper = case
    if kind == "SGD":
        hyper = {**hyper, "momentum": max(hyper["momentum"], 0.3)}
    key = "momentum_buffer" if kind == "SGD" else "sum"
    spec = dict(shapes=[(3,), (2, 2)], hyper=hyper, steps=3, seed=seed)
    got, want = both(sub, kind, **spec)
    for index, (mine, theirs) in enumerate(zip(got["state"], want["state"])):
        value = mine.get(key)
        assert isinstance(value, torch.Tensor), (
            f"optim.{describe(kind, spec)}: after 3 steps optimizer.state[p{index}] has keys {sorted(mine)}, "
            f"expected a tensor under {key!r} (torch.optim's name, so that state dicts match)")
        assert value.shape == theirs[key].shape and torch.allclose(value, theirs[key], rtol=RTOL, atol=ATOL), (
            f"optim.{describe(kind, spec)}: after 3 steps state[p{index}][{key!r}] is {value.flatten()[:3].tolist()}..., "
            f"{TORCH_NAME[kind]}'s is {theirs[key].flatten()[:3].tolist()}...")


# --- state dicts ----------------------------------------------------------------------------------

@pytest.mark.points(1)
@settings(max_examples=8)
@given(case=kinds_and_hyperparameters(), before=st.integers(1, 5), after=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
def test_state_dict_round_trip(sub, case, before, after, seed):
    """state_dict() saved with torch.save, loaded (weights_only=True) into a fresh optimizer, continues identically."""
    kind, hyper = case
    if kind == "SGD":
        hyper = {**hyper, "momentum": max(hyper["momentum"], 0.5)}
    spec = dict(shapes=[(3,), (2, 2)], hyper=hyper, seed=seed)
    first = sub.probe("optim.run", kind=kind, steps=before, save=True, **spec)
    resumed = sub.probe("optim.run", kind=kind, steps=after, init=[t[-1] for t in first["params"]], load=first["saved"],
                        **spec)
    want = probe.run(TORCH, kind=kind, steps=before + after, **spec)
    want["params"] = [t[before:] for t in want["params"]]
    assert_same_trajectory(resumed, want, f"optim.{describe(kind, spec)}: {before} steps, state_dict() through "
                           f"torch.save / torch.load(weights_only=True) into a fresh {kind}, {after} more steps",
                           first_step=before + 1)


@pytest.mark.points(1)
@settings(max_examples=8)
@given(case=kinds_and_hyperparameters(), before=st.integers(1, 5), after=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
def test_loads_torchs_state_dict(sub, case, before, after, seed):
    """A state dict saved from torch.optim.SGD / Adagrad loads into SGD / AdaGrad and continues the same trajectory."""
    kind, hyper = case
    if kind == "SGD":
        hyper = {**hyper, "momentum": max(hyper["momentum"], 0.5)}
    spec = dict(shapes=[(3,), (2, 2)], hyper=hyper, seed=seed)
    first = probe.run(TORCH, kind=kind, steps=before, save=True, **spec)
    resumed = sub.probe("optim.run", kind=kind, steps=after, init=[t[-1] for t in first["params"]], load=first["saved"],
                        **spec)
    want = probe.run(TORCH, kind=kind, steps=before + after, **spec)
    want["params"] = [t[before:] for t in want["params"]]
    extra = " (its state also holds 'step': tolerate extra keys)" if kind == "AdaGrad" else ""
    assert_same_trajectory(resumed, want, f"{before} steps of {TORCH_NAME[kind]}({', '.join(f'{k}={v!r}' for k, v in hyper.items())}), "
                           f"its state_dict() loaded into optim.{kind}, {after} more steps{extra}", first_step=before + 1)


# --- construction --------------------------------------------------------------------------------

HYPERPARAMETERS = {"SGD": ["lr", "momentum", "weight_decay"],
                   "AdaGrad": ["lr", "eps", "initial_accumulator_value", "weight_decay"]}


@pytest.mark.points(1)
@given(case=st.sampled_from([(k, n) for k, names in HYPERPARAMETERS.items() for n in names]),
       value=st.floats(-10.0, -1e-12) | st.sampled_from([-1.0, -1e-10]))
def test_negative_hyperparameters_raise(sub, case, value):
    """A negative lr, momentum, weight_decay, eps or initial_accumulator_value raises ValueError; zero is accepted."""
    kind, name = case
    sub.raises(ValueError, f"optim.{kind}", [torch.zeros(2)], **{name: value})
    zeros = {n: 0.0 for n in HYPERPARAMETERS[kind]}
    sub.call(f"optim.{kind}", [torch.zeros(2)], **zeros)


FORBIDDEN_NAMES = {"SGD", "Adagrad", "sgd", "adagrad", "_functional"}


def shortcuts(source: str) -> list[str]:
    """Uses of torch.optim's own SGD / Adagrad (classes, functional forms) or torch._foreach_* in the code."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and (node.attr in FORBIDDEN_NAMES or node.attr.startswith("_foreach_")):
            found.append(f"line {node.lineno}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id.startswith("_foreach_"):
            found.append(f"line {node.lineno}: {node.id}")
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("torch"):
            for alias in node.names:
                if alias.name in FORBIDDEN_NAMES or alias.name.startswith("_foreach_") or (
                        (node.module or "").split(".")[-1] in FORBIDDEN_NAMES):
                    found.append(f"line {node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[-1] in FORBIDDEN_NAMES:
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
              and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)
              and (node.args[1].value in FORBIDDEN_NAMES or node.args[1].value.startswith("_foreach_"))):
            found.append(f"line {node.lineno}: getattr(..., {node.args[1].value!r})")
    return found


@pytest.mark.points(1)
def test_written_from_scratch_with_torchs_defaults(sub):
    """SGD and AdaGrad subclass torch.optim.Optimizer, keep PyTorch's defaults, and use no torch.optim.SGD/Adagrad or _foreach_."""
    defaults = {"SGD": {"lr": 1e-3}, "AdaGrad": {"lr": 1e-2, "eps": 1e-10}}
    for kind in ("SGD", "AdaGrad"):
        spec = dict(shapes=[(3,), (2, 2)], steps=5, seed=11)
        got = sub.probe("optim.run", kind=kind, hyper={}, **spec)
        assert got["is_optimizer"], f"optim.{kind}(params) is not an instance of a torch.optim.Optimizer subclass"
        want = probe.run(TORCH, kind=kind, hyper=defaults[kind], **spec)
        assert_same_trajectory(got, want, f"5 steps of optim.{kind}(params) with the default hyperparameters "
                               f"(expected PyTorch's: {defaults[kind]}, momentum/weight decay/initial accumulator 0)")
    found = shortcuts(sub.source("optim"))
    assert not found, ("optim.py must implement the updates itself, without torch.optim's SGD/Adagrad "
                       f"(or their functional forms) or torch._foreach_* kernels; found {', '.join(found)}")


@pytest.mark.points(1)
@pytest.mark.gpu
def test_cuda_trajectories_match_torch_foreach(sub):
    """On CUDA (where torch.optim uses its foreach kernels) both optimizers follow torch's trajectories."""
    cases = [("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.01)),
             ("AdaGrad", dict(lr=0.1, eps=1e-3, initial_accumulator_value=0.1, weight_decay=0.01))]
    for kind, hyper in cases:
        for groups in (None, [{"params": [0, 2]}, {"params": [1], "lr": 1e-28}]):
            spec = dict(shapes=[(64, 32), (32,), (7, 3)], hyper=hyper, groups=groups, steps=20, seed=3, device="cuda")
            got, want = both(sub, kind, **spec)
            assert_same_trajectory(got, want, f"20 steps on CUDA of optim.{describe(kind, spec)}")
