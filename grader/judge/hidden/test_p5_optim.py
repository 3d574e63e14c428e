"""Hidden tests for P5 (optim.py): SGD and AdaGrad against torch.optim, 14 points.

Everything but the submission's own optimizer runs in the judge (``grader/judge/drivers/optim.py``):
the parameters' starting values, the loss, every gradient, the loop and every expected value.
The worker only holds the parameters (``torch.nn.Parameter``) and the submission's optimizer,
and is driven step by step by handle: the judge reads the parameters, computes the gradients,
sets ``p.grad`` (None for a skipped parameter), calls ``step`` and reads the parameters back.
The oracle is ``torch.optim.SGD`` / ``torch.optim.Adagrad`` (dampening 0, no Nesterov,
lr_decay 0), run in the judge by the same driver over the same inputs and call sequence.

Tolerance (rtol 1e-5, atol 1e-5, float32, up to 20 steps): a correct optimizer does the same
handful of float32 operations per step as torch's, possibly in another order or unfused
(``g + wd*p`` vs ``add(p, alpha=wd)``, ``p -= lr*g/d`` vs ``addcdiv_``; torch's foreach kernels
on CUDA), which differs by a few ulps per step. The problem is contracting for every drawn lr,
so those differences stay small: over 300 drawn settings, an implementation written with
out-of-place ops stayed within 1e-5 * |p| + 3e-7 of torch's foreach trajectory after 20 steps
(the reference matches it exactly). Real mistakes are off by 1e-4 to 1e-1 within a few steps
(a damped first momentum step by momentum * lr * g; eps inside the root, for eps >= 1e-3, by
about lr * eps / 2 per step; a lost momentum buffer or accumulator restarts the dynamics). A
mismatch names the step, the parameter, the index of the largest difference and both values,
and the diagnosis names the known mistake (a P5 mutant) whose answers the submission's reproduce.

P5's tests run in a worker of their own whose torch has no working optimizer (``drivers/optim_stubs.py``):
torch.optim's optimizer modules are stubs there (the files the worker can read included) and the
fused / foreach optimizer kernels raise, so no route to torch's update (a class, a functional form, a
resolver by string, a pickled name, replayed text, a rebinding from another module) performs one.
Every test first reads the submission's source (the judge's copy): a module of the package that is a
near copy of one of torch's optimizer modules (token similarity), or, in ``optim.py`` and every module
of the package it imports (``__init__.py`` included), a use of torch.optim's optimizers other than
``Optimizer``, their modules or functional forms, ``torch._foreach_*``, or any dynamic way of reaching
code, fails every test with the rule, the file and the line (``optim_source.assert_written_here``): the
message an honest student needs. The delegation tripwires (``sub.forbidding``) stay armed as well.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from grader.judge.drivers import optim as drive
from grader.judge.drivers import optim_source, optim_stubs
from grader.judge.drivers.optim import TORCH_NAME, JudgeSide, Scenario, WorkerSide

ORACLE = JudgeSide()


@pytest.fixture(scope="module", autouse=True)
def own_worker(sub):
    """P5's tests run in a worker of their own whose torch has no working optimizer: torch.optim's
    optimizer modules are stubs there and its fused / foreach kernels raise (``drivers.optim_stubs``)."""
    with sub.withholding(optim_stubs.withheld()):
        yield


@pytest.fixture(autouse=True)
def no_delegation(sub):
    """Each test: the source read for delegation first, then run with torch.optim's SGD/Adagrad and
    _foreach_ kernels forbidden, start to end."""
    optim_source.assert_written_here(sub.source_dir)
    with sub.forbidding(drive.DELEGATION, drive.DELEGATION_RULE):
        yield


# --- strategies ------------------------------------------------------------------------------

def shapes(max_params: int = 3):
    """Parameter shapes: 1 to ``max_params`` tensors of 1 or 2 dims (sizes 1..5)."""
    return st.lists(st.lists(st.integers(1, 5), min_size=1, max_size=2).map(tuple), min_size=1, max_size=max_params)


def sgd_hyperparameters():
    """lr, momentum (0 or 0.1..0.95) and weight decay (0 or 1e-4..0.1): all stable on the driver's problem."""
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


def kinds_with_decay():
    """As ``kinds_and_hyperparameters``, with SGD's momentum at least 0.5 and every weight decay at least 0.01:
    values that move a parameter whose step is not skipped, or whose gradient takes the decay."""
    return st.one_of(
        st.tuples(st.just("SGD"), st.fixed_dictionaries({"lr": st.floats(1e-3, 0.3), "momentum": st.floats(0.5, 0.95),
                                                         "weight_decay": st.floats(0.01, 0.1)})),
        st.tuples(st.just("AdaGrad"), adagrad_hyperparameters().flatmap(
            lambda h: st.floats(0.01, 0.1).map(lambda wd: {**h, "weight_decay": wd}))))


# --- helpers ----------------------------------------------------------------------------------

def compare(sub, kind: str, scenario: Scenario, what: str, hint: Callable[[], str] | None = None) -> drive.Run:
    """Run ``scenario`` on the submission (worker) and on torch.optim (judge); assert the same
    trajectory (a known wrong rule it follows is named by the diagnosis). The submission's run."""
    got = drive.run(WorkerSide(sub, scenario.device), kind, scenario)
    want = drive.run(JudgeSide(device=scenario.device), kind, scenario)
    drive.assert_same_trajectory(got, want, kind, what, hint=hint)
    return got


def consequence(sub, kind: str, scenario: Scenario) -> Callable[[], str]:
    """For a test of another rule whose run parts from torch.optim's: where the submission's plain run (the same
    parameters and hyperparameters, one group, every gradient there) already parts from it, say so, so that the
    message sends the student to the update rule, not to this test's rule. Run only on a failure."""
    def hint() -> str:
        plain = Scenario(shapes=scenario.shapes, hyper=scenario.hyper, steps=scenario.steps, seed=scenario.seed)
        found = drive.mismatch(drive.run(WorkerSide(sub), kind, plain).params, drive.run(ORACLE, kind, plain).params,
                               TORCH_NAME[kind])
        rule = "P5.sgd-matches-torch" if kind == "SGD" else "P5.adagrad-matches-torch"
        return (f" This follows from another mistake: with one param group and every gradient present, "
                f"optim.{plain.describe(kind)} already parts from {TORCH_NAME[kind]} ({found}). Fix the update rule "
                f"first (handout rule [{rule}]); this test checks the rule above it only." if found else "")
    return hint


def with_momentum(kind: str, hyper: dict, at_least: float) -> dict:
    return {**hyper, "momentum": max(hyper["momentum"], at_least)} if kind == "SGD" else hyper


# --- trajectories ----------------------------------------------------------------------------

@pytest.mark.rule("P5.sgd-matches-torch", "P5.weight-decay")
@pytest.mark.points(1)
@given(shape_list=shapes(), hyper=sgd_hyperparameters(), seed=st.integers(0, 2**31 - 1))
@example(shape_list=[(3,), (2, 2)], hyper={"lr": 0.05, "momentum": 1.0, "weight_decay": 1.0}, seed=1)
@example(shape_list=[(3,), (2, 2)], hyper={"lr": 0.05, "momentum": 0.5, "weight_decay": 1.0}, seed=2)
def test_sgd_trajectory_matches_torch(sub, shape_list, hyper, seed):
    """SGD follows torch.optim.SGD's trajectory for any lr, momentum and weight decay."""
    scenario = Scenario(shapes=shape_list, hyper=hyper, steps=15, seed=seed)
    compare(sub, "SGD", scenario, f"15 steps of optim.{scenario.describe('SGD')}")


@pytest.mark.rule("P5.adagrad-matches-torch", "P5.adagrad-initial-sum", "P5.adagrad-eps-outside", "P5.weight-decay")
@pytest.mark.points(2)
@given(shape_list=shapes(), hyper=adagrad_hyperparameters(), seed=st.integers(0, 2**31 - 1))
@example(shape_list=[(3,), (2, 2)], hyper={"lr": 0.1, "eps": 1e-10, "initial_accumulator_value": 0.0,
                                           "weight_decay": 1.0}, seed=3)
def test_adagrad_trajectory_matches_torch(sub, shape_list, hyper, seed):
    """AdaGrad follows torch.optim.Adagrad's trajectory for any lr, eps, initial accumulator and weight decay."""
    scenario = Scenario(shapes=shape_list, hyper=hyper, steps=15, seed=seed)
    compare(sub, "AdaGrad", scenario, f"15 steps of optim.{scenario.describe('AdaGrad')}")
    # A frozen parameter (requires_grad=False) gets its "sum" in __init__ too, as in torch.optim.Adagrad,
    # and keeps it at initial_accumulator_value (its .grad stays None).
    frozen = Scenario(shapes=[(3,), (2, 2)], hyper=hyper, steps=2, seed=seed, frozen=[1])
    what = f"2 steps of optim.{frozen.describe('AdaGrad')}"
    got = compare(sub, "AdaGrad", frozen, what)
    assert_state_matches(got, drive.run(ORACLE, "AdaGrad", frozen), "AdaGrad", "sum", what,
                         lambda: ": __init__ creates state[p]['sum'] for every parameter of every group, frozen ones "
                                 "included")


def assert_state_matches(got: drive.Run, want: drive.Run, kind: str, key: str, what: str,
                         hint: Callable[[], str] = lambda: "") -> None:
    """state[p][key] of the submission (read from the worker's optimizer) equals torch.optim's (judge); ``hint``
    (called on a mismatch of values) may add where the mismatch comes from."""
    for index, (mine, theirs) in enumerate(zip(drive.state_of(got), drive.state_of(want))):
        value = mine.get(key) if type(mine) is dict else None
        assert isinstance(value, torch.Tensor), (
            f"{what}: optimizer.state[p{index}] is {sorted(mine) if type(mine) is dict else mine!r}, expected a "
            f"dict with a tensor under {key!r} (torch.optim's name, so that state dicts match)")
        assert value.shape == theirs[key].shape and torch.allclose(value, theirs[key], rtol=drive.RTOL,
                                                                   atol=drive.ATOL), (
            f"{what}: state[p{index}][{key!r}] is {value.flatten()[:3].tolist()}..., "
            f"{TORCH_NAME[kind]}'s is {theirs[key].flatten()[:3].tolist()}...{hint()}")


@pytest.mark.rule("P5.sgd-first-buffer", "P5.sgd-buffer-copy")
@pytest.mark.points(1)
@settings(max_examples=10)
@given(momentum=st.floats(0.1, 0.95), lr=st.floats(1e-2, 0.3), steps=st.integers(1, 4), seed=st.integers(0, 2**31 - 1))
def test_momentum_buffer(sub, momentum, lr, steps, seed):
    """SGD's momentum buffer starts at g (not (1 - m) g) on each parameter's first step, lives in state['momentum_buffer'], and is not p.grad."""
    # Each step the judge calls zero_grad(set_to_none=False) in the worker, which zeroes the old
    # gradients in place, then copies the new gradient into p.grad in place (as backward
    # accumulates): a buffer that *is* p.grad (no copy) is changed behind the optimizer's back.
    scenario = Scenario(shapes=[(3,), (2, 2)], hyper=dict(lr=lr, momentum=momentum), steps=steps, seed=seed,
                        set_to_none=False)
    what = f"{steps} step(s) of optim.{scenario.describe('SGD')} with zero_grad(set_to_none=False)"
    got = compare(sub, "SGD", scenario, what)
    want = drive.run(ORACLE, "SGD", scenario)
    assert_state_matches(got, want, "SGD", "momentum_buffer", what + " (on the first step the buffer is a copy of g)")
    # The first step is each parameter's own: p1's first gradient comes on the optimizer's second step.
    late = Scenario(shapes=[(3,), (2, 2)], hyper=dict(lr=lr, momentum=momentum), steps=steps + 1, seed=seed,
                    no_grad=[[1]] + [[]] * steps)
    what = (f"{steps + 1} steps of optim.{late.describe('SGD')}, parameter 1's .grad None on step 1 (its first "
            "gradient comes on step 2, when it starts its own buffer at g)")
    got = compare(sub, "SGD", late, what)
    assert_state_matches(got, drive.run(ORACLE, "SGD", late), "SGD", "momentum_buffer", what)


def group_layouts():
    """Three parameters split into 2 or 3 groups, each overriding some hyperparameters."""
    def layout(kind: str):
        hyper = sgd_hyperparameters() if kind == "SGD" else adagrad_hyperparameters()
        overrides = hyper  # a group's own initial_accumulator_value is not read: the constructor's applies to all
        partitions = st.sampled_from([[[0], [1, 2]], [[0, 1], [2]], [[2], [0], [1]]])
        return st.tuples(st.just(kind), hyper, partitions, st.lists(overrides, min_size=3, max_size=3),
                         st.lists(st.sets(st.sampled_from(["lr", "momentum", "weight_decay", "eps",
                                                           "initial_accumulator_value"])), min_size=3, max_size=3),
                         st.integers(0, 2))
    return st.sampled_from(["SGD", "AdaGrad"]).flatmap(layout)


@pytest.mark.rule("P5.group-hyperparameters", "P5.adagrad-initial-sum")
@pytest.mark.points(1)
@settings(max_examples=15)
@given(case=group_layouts(), seed=st.integers(0, 2**31 - 1))
@example(case=("AdaGrad", {"lr": 0.1, "eps": 1e-10, "initial_accumulator_value": 0.0, "weight_decay": 0.05},
               [[0], [1, 2]], [{"weight_decay": 0.0}] * 3, [{"weight_decay"}, set(), set()], 1), seed=3)
@example(case=("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.05}, [[0], [1, 2]],
               [{"momentum": 0.0, "weight_decay": 0.0}] * 3, [{"momentum", "weight_decay"}, set(), set()], 1), seed=4)
def test_per_group_hyperparameters(sub, case, seed):
    """Each param group uses its own lr / momentum / weight_decay / eps (0 over a non-zero default too); a group with lr 1e-28 does not move."""
    kind, hyper, partition, overrides, keys, frozen = case
    groups = []
    for number, indices in enumerate(partition):
        group = {"params": indices, **{k: v for k, v in overrides[number].items() if k in keys[number]}}
        if number == frozen % len(partition):
            group["lr"] = 1e-28
        groups.append(group)
    scenario = Scenario(shapes=[(4,), (2, 3), (3,)], hyper=hyper, groups=groups, steps=8, seed=seed)
    what = f"8 steps of optim.{scenario.describe(kind)}"
    got = compare(sub, kind, scenario, what, consequence(sub, kind, scenario))
    for index in groups[frozen % len(partition)]["params"]:
        trace = got.params[index]
        assert torch.equal(trace[-1], trace[0]), (
            f"{what}: parameter {index} is in the group with lr=1e-28 and moved "
            f"(from {trace[0].flatten()[:3].tolist()} to {trace[-1].flatten()[:3].tolist()}): use each group's own lr")
    if kind == "AdaGrad":  # the initial sum is torch.full_like(p, value): the parameter's dtype, float64 too
        side = WorkerSide(sub)
        p = side.parameter(torch.zeros(3, dtype=torch.float64))
        state = side.optimizer(kind, [p], hyper).call("state_dict")["state"]
        dtypes = [getattr(entry.get("sum"), "dtype", None) for entry in state.values()]
        assert dtypes == [torch.float64], (
            f"optim.AdaGrad([a float64 parameter], **{hyper}).state_dict()['state'] holds sums of dtypes {dtypes}, "
            "expected [torch.float64]: torch.full_like(p, initial_accumulator_value) keeps the parameter's dtype")


@pytest.mark.rule("P5.skip-none-grad")
@pytest.mark.points(1)
@settings(max_examples=15)
@given(case=kinds_with_decay(), pattern=st.lists(st.sets(st.integers(0, 2)), min_size=8, max_size=8),
       zeros=st.lists(st.sets(st.integers(0, 2)), min_size=8, max_size=8), seed=st.integers(0, 2**31 - 1))
@example(case=("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.05}), pattern=[{2}, {1, 2}] + [{2}] * 6,
         zeros=[set(), {0}] + [set()] * 6, seed=5)
def test_params_without_grad_are_skipped(sub, case, pattern, zeros, seed):
    """A parameter whose .grad is None on a step is skipped: unchanged, its state untouched (no entry created), no error.

    A gradient of zeros is a step like any other (momentum and weight decay move the parameter)."""
    kind, hyper = case  # momentum and weight decay would move a parameter that is not skipped properly
    no_grad = [sorted(s) for s in pattern]
    zero = [sorted(z - s) for z, s in zip(zeros, pattern)]
    scenario = Scenario(shapes=[(3,), (2, 2), (4,)], hyper=hyper, steps=8, seed=seed, no_grad=no_grad, zero=zero)
    what = (f"8 steps of optim.{scenario.describe(kind)} with .grad set to None for parameters {no_grad} and to "
            f"zeros for parameters {zero} (per step)")
    got = drive.run(WorkerSide(sub), kind, scenario)
    for step, skipped in enumerate(no_grad, start=1):
        for index in skipped:
            trace = got.params[index]
            assert torch.equal(trace[step], trace[step - 1]), (
                f"{what}: parameter {index} has .grad None on step {step} and changed: skip it")
    want = drive.run(ORACLE, kind, scenario)
    drive.assert_same_trajectory(got, want, kind, what, hint=consequence(sub, kind, scenario))
    # A skipped parameter's state is not even read: self.state[p] of the defaultdict creates an empty
    # entry, which torch.optim.SGD never makes for a parameter that never had a gradient.
    entries, expected = drive.state_entries(got), drive.state_entries(want)
    assert entries == expected, (
        f"{what}: optimizer.state has an entry for parameters {[i for i, e in enumerate(entries) if e]}, expected "
        f"entries for {[i for i, e in enumerate(expected) if e]} as in {TORCH_NAME[kind]}: a skipped parameter's "
        "state is not touched, not even read as self.state[p] (which creates an empty entry)")


@pytest.mark.rule("P5.closure")
@pytest.mark.points(1)
@settings(max_examples=10)
@given(case=kinds_and_hyperparameters(), seed=st.integers(0, 2**31 - 1))
def test_step_calls_the_closure_and_returns_its_loss(sub, case, seed):
    """step(closure) calls the closure once, with gradients enabled, and returns its loss (two param groups)."""
    # The closure is the judge's: it asks the worker whether gradients are enabled (the
    # submission's own grad mode, as its step set it), reads the parameters, computes the loss
    # and gradients in the judge and sets p.grad. Step's return value is compared with the loss
    # that closure returned in the same step, not with torch.optim's: the update rule is the
    # trajectory tests' business.
    kind, hyper = case
    scenario = Scenario(shapes=[(3,), (2, 2)], hyper=hyper, steps=4, seed=seed, closure=True,
                        groups=[{"params": [0]}, {"params": [1]}])
    what = f"optim.{scenario.describe(kind)}.step(closure)"
    got = drive.run(WorkerSide(sub), kind, scenario)
    for step, (losses, returned) in enumerate(zip(got.losses, got.returned), start=1):
        assert len(losses) == 1, (f"{what} called the closure {len(losses)} times on step {step}, expected once "
                                  "(not once per param group)")
        assert returned is not None and torch.equal(torch.as_tensor(returned), losses[-1]), (
            f"{what} returned {returned!r} on step {step}; the closure returned {losses[-1]!r}")
        before, seen = got.params, got.closure_saw[step - 1][0]
        assert all(torch.equal(b[step - 1], s) for b, s in zip(before, seen)), (
            f"{what}: on step {step} the closure saw parameters already changed by that step: call it first")
    assert all(got.grad_enabled), (
        f"{what} called the closure with gradients disabled (torch.is_grad_enabled() was False inside it): "
        "step runs under no_grad, so call the closure inside `with torch.enable_grad():`")


@pytest.mark.rule("P5.sgd-state-key", "P5.adagrad-sum-key")
@pytest.mark.points(1)
@settings(max_examples=10)
@given(case=kinds_and_hyperparameters(), seed=st.integers(0, 2**31 - 1))
def test_state_keys_hold_torchs_values(sub, case, seed):
    """state[p] holds 'momentum_buffer' (SGD, momentum > 0; no tensor at momentum 0) or 'sum' (AdaGrad), as torch.optim's."""
    kind, hyper = case
    key = "momentum_buffer" if kind == "SGD" else "sum"
    scenario = Scenario(shapes=[(3,), (2, 2)], hyper=with_momentum(kind, hyper, 0.3), steps=3, seed=seed)
    got, want = drive.run(WorkerSide(sub), kind, scenario), drive.run(ORACLE, kind, scenario)
    assert_state_matches(got, want, kind, key, f"optim.{scenario.describe(kind)}: after 3 steps",
                         consequence(sub, kind, scenario))
    if kind == "SGD":  # plain SGD costs no optimizer memory, as torch.optim.SGD
        plain = Scenario(shapes=[(3,), (2, 2)], hyper={**hyper, "momentum": 0.0}, steps=2, seed=seed)
        for index, entry in enumerate(drive.state_of(drive.run(WorkerSide(sub), kind, plain))):
            held = [k for k, v in entry.items() if isinstance(v, torch.Tensor)] if type(entry) is dict else entry
            assert not held, (f"optim.{plain.describe(kind)}: after 2 steps optimizer.state[p{index}] holds "
                              f"{held!r}, expected no tensor (torch.optim.SGD keeps no state at momentum 0)")


@pytest.mark.rule("P5.in-place", "P5.grad-untouched")
@pytest.mark.points(1)
@settings(max_examples=6)
@given(case=kinds_with_decay(), seed=st.integers(0, 2**31 - 1))
@example(case=("SGD", {"lr": 0.1, "momentum": 0.9, "weight_decay": 0.0}), seed=1)  # g is p.grad itself until
@example(case=("AdaGrad", {"lr": 0.1, "weight_decay": 0.0}), seed=2)  # a new tensor is made
def test_updates_in_place_leaving_p_grad_alone(sub, case, seed):
    """step updates each parameter in its own memory (data_ptr unchanged) and leaves p.grad as the caller set it."""
    kind, hyper = case
    shapes_ = [(3,), (2, 2)]
    objective, side = drive.Objective(shapes_, seed), WorkerSide(sub)
    params = [side.parameter(v) for v in objective.start]
    optimizer, together = side.optimizer(kind, params, hyper), side.together(params)
    memory = [p.call("data_ptr") for p in params]
    values = objective.start
    what = f"optim.{Scenario(shapes=shapes_, hyper=hyper, steps=3).describe(kind)}"
    for step in range(1, 4):
        _, grads = objective.loss_and_gradients(values)
        for p, g in zip(params, grads):
            side.set_grad(p, g)
        optimizer.call("step")
        for index, (p, g) in enumerate(zip(params, grads)):
            assert p.call("data_ptr") == memory[index], (
                f"{what}: after step {step} parameter {index} lives in other memory (its data_ptr() changed): "
                "update it in place (p.add_, p.addcdiv_), never p.data = ...")
            grad = p.get("grad")
            assert isinstance(grad, torch.Tensor) and torch.equal(grad, g), (
                f"{what}: after step {step} parameter {index}'s .grad is "
                f"{grad.flatten()[:3].tolist() if isinstance(grad, torch.Tensor) else grad!r}..., the gradient set "
                f"before the step was {g.flatten()[:3].tolist()}...: leave p.grad alone (g = p.grad.add(p, alpha=wd) "
                "makes a new tensor)")
        values = together.read()


# --- state dicts ----------------------------------------------------------------------------------

def resume(sub, kind: str, first: drive.Run, scenario: Scenario, before: int, after: int, what: str) -> None:
    """Save ``first``'s state dict (read as data) with torch.save in the judge, load it back with
    torch.load(weights_only=True), hand it to a fresh submission optimizer over parameters at
    ``first``'s last values, run ``after`` steps; compare with torch.optim run straight through
    ``before + after`` steps in the judge."""
    loaded = drive.through_torch_save(first.optimizer.call("state_dict"))
    resumed_scenario = Scenario(shapes=scenario.shapes, hyper=scenario.hyper, seed=scenario.seed, steps=after,
                                init=[t[-1] for t in first.params], load=loaded)
    resumed = drive.run(WorkerSide(sub), kind, resumed_scenario)
    want = drive.run(ORACLE, kind, Scenario(shapes=scenario.shapes, hyper=scenario.hyper, seed=scenario.seed,
                                            steps=before + after))
    want.params = [t[before:] for t in want.params]

    def hint() -> str:
        fresh = drive.run(ORACLE, kind, replace(resumed_scenario, load=None))
        return (" Hint: this matches a fresh optimizer that did not get the saved state (lost state: keep "
                "everything per parameter in self.state[p])." if drive.mismatch(resumed.params, fresh.params, "")
                is None else "")

    drive.assert_same_trajectory(resumed, want, kind, what, first_step=before + 1, hint=hint)


@pytest.mark.rule("P5.state-dict-round-trip")
@pytest.mark.points(1)
@settings(max_examples=8)
@given(case=kinds_and_hyperparameters(), before=st.integers(1, 5), after=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
def test_state_dict_round_trip(sub, case, before, after, seed):
    """state_dict() saved with torch.save, loaded (weights_only=True) into a fresh optimizer, continues identically."""
    kind, hyper = case
    scenario = Scenario(shapes=[(3,), (2, 2)], hyper=with_momentum(kind, hyper, 0.5), seed=seed, steps=before)
    first = compare(sub, kind, scenario, f"{before} steps of optim.{scenario.describe(kind)}, before saving its state",
                    consequence(sub, kind, scenario))
    resume(sub, kind, first, scenario, before, after,
           f"optim.{scenario.describe(kind)}: {before} steps, state_dict() through torch.save / "
           f"torch.load(weights_only=True) into a fresh {kind}, {after} more steps")


@pytest.mark.rule("P5.loads-torch-state-dict", "P5.adagrad-extra-keys")
@pytest.mark.points(1)
@settings(max_examples=8)
@given(case=kinds_and_hyperparameters(), before=st.integers(1, 5), after=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
@example(case=("AdaGrad", {"lr": 0.1, "eps": 1e-10, "initial_accumulator_value": 0.0, "weight_decay": 0.0}), before=2,
         after=2, seed=5)
def test_loads_torchs_state_dict(sub, case, before, after, seed):
    """A state dict saved from torch.optim.SGD / Adagrad loads into SGD / AdaGrad and continues the same trajectory."""
    kind, hyper = case
    hyper = with_momentum(kind, hyper, 0.5)
    scenario = Scenario(shapes=[(3,), (2, 2)], hyper=hyper, seed=seed, steps=before)
    first = drive.run(ORACLE, kind, scenario)
    extra = " (its state also holds 'step': tolerate extra keys)" if kind == "AdaGrad" else ""
    resume(sub, kind, first, scenario, before, after,
           f"{before} steps of {TORCH_NAME[kind]}({', '.join(f'{k}={v!r}' for k, v in hyper.items())}), "
           f"its state_dict() loaded into optim.{kind}, {after} more steps{extra}")


# --- construction --------------------------------------------------------------------------------

HYPERPARAMETERS = {"SGD": ["lr", "momentum", "weight_decay"],
                   "AdaGrad": ["lr", "eps", "initial_accumulator_value", "weight_decay"]}


@pytest.mark.rule("P5.sgd-raises", "P5.adagrad-raises")
@pytest.mark.points(1)
@given(case=st.sampled_from([(k, n) for k, names in HYPERPARAMETERS.items() for n in names]),
       value=st.floats(-10.0, -1e-12) | st.sampled_from([-1.0, -1e-10]))
def test_negative_hyperparameters_raise(sub, case, value):
    """A negative lr, momentum, weight_decay, eps or initial_accumulator_value raises ValueError; zero is accepted, so is
    one or more (only the sign is checked), and a param group's own value is used as it is."""
    kind, name = case
    sub.raises(ValueError, f"optim.{kind}", [torch.zeros(2)], **{name: value})
    for accepted in (0.0, 1.0):
        sub.call(f"optim.{kind}", [torch.zeros(2)], **{n: accepted for n in HYPERPARAMETERS[kind]})
    sub.call(f"optim.{kind}", [{"params": [torch.zeros(2)], name: value}])  # a group's own value: used as it is


@pytest.mark.rule("P5.sgd-matches-torch", "P5.adagrad-matches-torch", "P5.from-scratch")
@pytest.mark.points(1)
def test_written_from_scratch_with_torchs_defaults(sub):
    """SGD and AdaGrad subclass torch.optim.Optimizer, keep PyTorch's defaults, and use no torch.optim.SGD/Adagrad or _foreach_."""
    # The source (the judge's own copy of the submission) was read by the autouse fixture, as for
    # every test; the subclass check asks the worker isinstance(optimizer, torch.optim.Optimizer)
    # about the submission's object (driver).
    defaults = {"SGD": {"lr": 1e-3}, "AdaGrad": {"lr": 1e-2, "eps": 1e-10}}
    for kind in ("SGD", "AdaGrad"):
        scenario = Scenario(shapes=[(3,), (2, 2)], hyper={}, steps=5, seed=11)
        got = drive.run(WorkerSide(sub), kind, scenario)
        want = drive.run(ORACLE, kind, Scenario(shapes=[(3,), (2, 2)], hyper=defaults[kind], steps=5, seed=11))
        drive.assert_same_trajectory(got, want, kind, f"5 steps of optim.{kind}(params) with the default "
                                     f"hyperparameters (expected PyTorch's: {defaults[kind]}, momentum/weight "
                                     "decay/initial accumulator 0)")


@pytest.mark.points(1)
@pytest.mark.gpu
def test_cuda_trajectories_match_torch_foreach(sub):
    """On CUDA (where torch.optim uses its foreach kernels) both optimizers follow torch's trajectories."""
    # The parameters and the optimizer live on the worker's GPU; the oracle runs on the judge's.
    # Gradients are computed in the judge (on the CPU) and sent to both.
    cases = [("SGD", dict(lr=0.05, momentum=0.9, weight_decay=0.01)),
             ("AdaGrad", dict(lr=0.1, eps=1e-3, initial_accumulator_value=0.1, weight_decay=0.01))]
    for kind, hyper in cases:
        for groups in (None, [{"params": [0, 2]}, {"params": [1], "lr": 1e-28}]):
            scenario = Scenario(shapes=[(64, 32), (32,), (7, 3)], hyper=hyper, groups=groups, steps=20, seed=3,
                                device="cuda")
            compare(sub, kind, scenario, f"20 steps on CUDA of optim.{scenario.describe(kind)}")
