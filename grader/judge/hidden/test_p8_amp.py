"""Hidden suite for P8 (amp.py): autocast, gradient scaling and clipping, checkpointing, speed.

The judge builds the model, SGD, ``nn.MSELoss`` and CPU ``GradScaler`` in the worker as library
objects (grader/judge/drivers/amp.py), calls ``amp.train_step``/``amp.train``/``amp.checkpointed`` on them
and reads back parameters, gradients, scale and returned values; the oracles run in the judge
(grader/judge/drivers/amp_oracle.py). The precision a step ran in shows in those values, on inputs where
16-bit rounding shows, never by hooks the worker could call itself: nothing but the submission's code and library objects
runs in the worker. Measurements are taken from
outside the worker: its process tree's memory (``sub.measure``), its device memory as the NVIDIA
driver reports it, the wall time around each call; GPU reference figures come from the judge process.
"""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import example, given, settings
from hypothesis import strategies as st

from grader import wire
from grader.judge.drivers import amp as drive
from grader.judge.drivers.amp_oracle import (ATOL_PARAMS, DTYPES, MEASURABLE, RTOL, RTOL_16, VISIBLE_OFFSET, batch,
                                       blocks_state, checkpoint_memory, close, dot_loss, judge_bf16_reference,
                                       judge_plain_cuda, max_param_diff, model_state, oracle_norm, oracle_run,
                                       oracle_scale, oracle_step, plain_blocks_run, scalers, setups, visible_case)
from grader.judge.drivers.answers import shown

CKPT = "amp.checkpointed"
TRAIN = "amp.train"


def parameters_moved(after: dict, state: dict) -> bool:
    """Whether any parameter ``after`` holds differs from where ``state`` started it: the optimizer stepped."""
    return any(not torch.equal(after[name], value) for name, value in state.items() if name in after)


@pytest.mark.rule("P8.loss-float", "P8.scaled-backward")
# --- train_step -----------------------------------------------------------------------------------

@pytest.mark.points(1)
@settings(max_examples=15)
@given(setup=setups(), lr=st.floats(1e-3, 1.0), scaler=scalers())
def test_fp32_step_matches_a_manual_step(sub, setup, lr, scaler):
    """An fp32 train_step (with or without a GradScaler) returns the unscaled loss and makes the SGD update a manual step makes"""
    seed, width, n = setup
    state, (x, y) = model_state(seed, width), batch(seed, n)
    trainer, results, scales = drive.run_steps(sub, state, x, y, scaler=scaler, lr=lr)
    call = drive.describe("fp32", scaler, None, f" with SGD(lr={lr:.4g}), width {width}, batch {n}")
    result = drive.check_result(results[0], call)
    want_loss, _, want_params = oracle_step(state, x, y, lr=lr)
    assert close(result["loss"], want_loss), (
        f"{call} returned loss {result['loss']!r}, expected {want_loss!r} (loss_fn(model(x), y) before the update, "
        "unscaled)")
    assert result["grad_norm"] is None and result["skipped"] is False, (
        f"{call} returned {result}, expected grad_norm None (no max_grad_norm) and skipped False (finite gradients)")
    diff = max_param_diff(trainer.parameters(), want_params)
    assert diff <= ATOL_PARAMS, (f"{call}: parameters off by {diff:.3g} from one SGD step on the gradients of that loss"
                                 + (" (backward through scaler.scale(loss), once; scaler.step unscales)" if scaler else ""))


@pytest.mark.rule("P8.grads-none", "P8.params-float32")
@pytest.mark.points(1)
@settings(max_examples=15)
@given(setup=setups(), precision=st.sampled_from(["fp32", "bf16", "fp16"]), scaler=scalers(),
       max_grad_norm=st.none() | st.floats(0.01, 100.0), steps=st.integers(1, 3))
def test_gradients_none_and_parameters_float32(sub, setup, precision, scaler, max_grad_norm, steps):
    """After train_step every .grad is None and the parameters are still float32"""
    if precision == "fp16" and scaler is None:
        scaler = {"init_scale": 1024.0}
    seed, width, n = setup
    state, (x, y) = model_state(seed, width), batch(seed, n)
    trainer, results, scales = drive.run_steps(sub, state, x, y, precision, scaler, max_grad_norm, poisons=[None] * steps)
    call = drive.describe(precision, scaler, max_grad_norm, f" called {steps} time(s)")
    for result in results:
        drive.check_result(result, call)
    grads_none = trainer.grads_none()
    grads = ["None" if none else "a tensor" for none in grads_none]
    assert all(grads_none), (
        f"after {call} the parameters' .grad are {grads}, expected all None: optimizer.zero_grad(set_to_none=True)")
    after = trainer.parameters()
    dtypes = sorted({str(p.dtype) for p in after.values()})
    assert dtypes == ["torch.float32"], (
        f"after {call} the parameters are {dtypes}, expected float32: autocast computes in 16 bits, "
        "the parameters (the master weights) stay float32")
    # No poisoned gradient here, so outside fp16 (where a scaled gradient may overflow and the step
    # is rightly skipped) every call steps: parameters left as they were were never trained.
    assert precision == "fp16" or parameters_moved(after, state), (
        f"after {call} the parameters are exactly as they started: the optimizer never stepped")
    # The master weights keep every float32 bit: a step with lr=0 leaves them exactly as they were. A model cast to
    # 16 bits and back is float32 again, but rounded (by up to 2**-9 of each weight in bf16).
    # The optimizer here also holds a parameter outside the model (a learnable loss scale, say), with a gradient.
    trainer, results, _ = drive.run_steps(sub, state, x, y, precision, scaler, max_grad_norm, lr=0.0, outside=True)
    call = drive.describe(precision, scaler, max_grad_norm, " with SGD(lr=0.0)")
    drive.check_result(results[0], call)
    assert trainer.outside_grad_none(), (
        f"after {call}, with the optimizer also holding a parameter outside the model, that parameter's .grad is "
        "a tensor, expected None: optimizer.zero_grad(set_to_none=True) clears every parameter the optimizer holds "
        "(model.zero_grad reaches only the model's)")
    diff = max_param_diff(trainer.parameters(), state)
    assert diff == 0, (
        f"after {call} the parameters are up to {diff:.3g} away from where they started, expected them bit for bit "
        "unchanged (lr=0 moves nothing): the float32 master weights are never cast to 16 bits, not even and back")


def norm_mistake(got: object, want: float, scale: float, max_grad_norm: float, moved: float, want_moved: float) -> str:
    """": " and the mistake a wrong grad_norm shows, from how it relates to torch's norm and to the step made ("" if none)."""
    if not isinstance(got, float):
        return ""
    if close(got, want * scale, 1e-3) and scale != 1:
        if moved < want_moved / 16:  # clipped while `scale` times too large, then unscaled: a step that much too small
            return (f"; it is the scale ({scale:g}) times that, and the step that much too small: clip_grad_norm_ ran "
                    "on the scaled gradients (call scaler.unscale_(optimizer) before it)")
        return (f"; it is the scale ({scale:g}) times that, yet the step is not that much too small (clipping ran after "
                "unscale_): the gradients were scaled twice (scaler.scale applied to a loss already scaled); backward "
                "through scaler.scale(loss) once")
    if close(got, min(want, max_grad_norm), 1e-4) and want > max_grad_norm:
        return "; it is the norm after clipping: report the value clip_grad_norm_ returns"
    return ""


@pytest.mark.rule("P8.grad-norm", "P8.scaled-backward")
@pytest.mark.points(1)
@settings(max_examples=20)
@given(setup=setups(), precision=st.sampled_from(["fp32", "bf16"]), scaler=scalers(),
       max_grad_norm=st.floats(1e-3, 1e3))
def test_grad_norm_is_the_unscaled_norm_before_clipping(sub, setup, precision, scaler, max_grad_norm):
    """grad_norm is clip_grad_norm_'s total norm before clipping, on unscaled gradients"""
    seed, width, n = setup
    state, (x, y) = model_state(seed, width), batch(seed, n)
    trainer, results, scales = drive.run_steps(sub, state, x, y, precision, scaler, max_grad_norm)
    call = drive.describe(precision, scaler, max_grad_norm)
    result = drive.check_result(results[0], call)
    want = oracle_norm(state, x, y, precision)
    got = result["grad_norm"]
    if not (isinstance(got, float) and close(got, want, 1e-4 if precision == "fp32" else RTOL_16)):
        _, _, want_params = oracle_step(state, x, y, precision, max_grad_norm)
        mistake = norm_mistake(got, want, scaler["init_scale"] if scaler else 1.0, max_grad_norm,
                               max_param_diff(trainer.parameters(), state), max_param_diff(want_params, state))
        raise AssertionError(f"{call} returned grad_norm {got!r}, expected {want!r}: the total norm "
                             f"torch.nn.utils.clip_grad_norm_ returns before clipping, on the true gradients{mistake}")
    assert result["skipped"] is False, f"{call} returned skipped True, expected False: every gradient is finite"


@pytest.mark.rule("P8.unscale-before-clip", "P8.grad-norm")
@pytest.mark.points(1)
@settings(max_examples=15)
@given(setup=setups(), scaler=scalers(), fraction=st.floats(0.05, 0.9), lr=st.floats(0.01, 1.0))
# Always one case with a real scale: at init_scale 1 (the simplest draw) or without a scaler, clipping
# before unscale_ gives the right step.
@example(setup=(0, 8, 8), scaler={"init_scale": 2.0**16}, fraction=0.5, lr=0.1)
def test_clipping_is_applied_to_unscaled_gradients(sub, setup, scaler, fraction, lr):
    """With max_grad_norm below the gradient norm, the update uses the clipped, unscaled gradients of the optimizer's parameters (all its param groups)"""
    seed, width, n = setup
    state, (x, y) = model_state(seed, width), batch(seed, n)
    # "last": the SGD holds the last layer only; the first layer's gradients exist but are not the
    # optimizer's, so they count neither in the norm nor in the clipping. "groups": it holds both
    # layers, one param group each; both groups count, clipped together.
    for optimized, over in [("all", "SGD(model.parameters()"), ("last", "SGD(model[2].parameters()"),
                            ("groups", "SGD([{'params': model[0].parameters()}, {'params': model[2].parameters()}]")]:
        max_grad_norm = fraction * oracle_norm(state, x, y, optimized=optimized)
        trainer, results, scales = drive.run_steps(sub, state, x, y, scaler=scaler, max_grad_norm=max_grad_norm, lr=lr,
                                                   optimized=optimized)
        call = drive.describe("fp32", scaler, f"{max_grad_norm:.4g} ({fraction:.2f} x the norm of the optimizer's "
                              "gradients)", f" with {over}, lr={lr:.3g})")
        result = drive.check_result(results[0], call)
        _, want_norm, want = oracle_step(state, x, y, max_grad_norm=max_grad_norm, lr=lr, optimized=optimized)
        diff = max_param_diff(trainer.parameters(), want)
        assert diff <= ATOL_PARAMS, (
            f"{call}: parameters off by {diff:.3g} from an SGD step with the optimizer's gradients clipped to norm "
            f"{max_grad_norm:.4g}: unscale_ the gradients, clip those of the optimizer's parameters (every param "
            "group's, together), then step")
        got = result["grad_norm"]
        assert isinstance(got, float) and close(got, want_norm), (
            f"{call} returned grad_norm {got!r}, expected {want_norm!r}: the norm clip_grad_norm_ returns over the "
            "parameters of every group of optimizer.param_groups, not model.parameters() nor the first group's alone")


@pytest.mark.rule("P8.skipped", "P8.scaler-step-update", "P8.grads-none", "P8.grad-norm")
@pytest.mark.points(1)
@settings(max_examples=10)
@given(setup=setups(), poison=st.sampled_from(["inf", "nan"]), k=st.integers(1, 24),
       precision=st.sampled_from(["fp32", "bf16", "fp16"]), max_grad_norm=st.none() | st.just(1.0))
@example(setup=(0, 8, 8), poison="nan", k=10, precision="fp32", max_grad_norm=None)  # the scaler skips on NaN too
@example(setup=(1, 8, 8), poison="inf", k=10, precision="fp32", max_grad_norm=1.0)  # a skipped step's norm is inf
def test_non_finite_gradient_skips_the_step(sub, setup, poison, k, precision, max_grad_norm):
    """An inf/NaN gradient: skipped True, parameters unchanged, scale halved; a normal step (even one that grows the scale) is not skipped; without a scaler nothing is skipped"""
    seed, width, n = setup
    state, (x, y) = model_state(seed, width), batch(seed, n)
    scaler = {"init_scale": 2.0**k}
    call = drive.describe(precision, scaler, max_grad_norm, f" with an {poison} gradient")
    trainer, results, scales = drive.run_steps(sub, state, x, y, precision, scaler, max_grad_norm, poisons=[poison])
    result = drive.check_result(results[0], call)
    assert result["skipped"] is True, f"{call} returned skipped {result['skipped']!r}, expected True"
    norm = result["grad_norm"]
    assert max_grad_norm is None or (isinstance(norm, float) and not math.isfinite(norm)), (
        f"{call} returned grad_norm {norm!r}, expected the float clip_grad_norm_ returns, inf or nan here: with "
        "max_grad_norm, grad_norm is that norm whether or not the scaler then skips the step, as rule "
        "[P8.grad-norm] says")
    diff = max_param_diff(trainer.parameters(), state)
    assert diff == 0, f"{call} changed the parameters by up to {diff:.3g}, expected them unchanged (scaler.step skips)"
    want_scale = oracle_scale(2.0**k, [True])
    assert scales[0] == want_scale, (
        f"after {call} the scale is {scales[0]!r}, expected {want_scale!r}: scaler.update() halves it")
    assert all(trainer.grads_none()), f"after {call} some .grad are not None, expected all None"

    # The follow-up step must not overflow for real: an fp16 backward at scale 2**(k-1) overflows
    # once a gradient exceeds 65504 / 2**(k-1) (and then skipping is right), so it starts at 2**9 at most.
    k = min(k, 9)
    scaler = {"init_scale": 2.0**k}
    call = drive.describe(precision, scaler, max_grad_norm, f" with an {poison} gradient")
    trainer, results, scales = drive.run_steps(sub, state, x, y, precision, scaler, max_grad_norm, poisons=[poison, None])
    result = drive.check_result(results[1], f"{call}, then a normal step")
    want_scale = oracle_scale(2.0**k, [True, False])
    assert result["skipped"] is False and scales[1] == want_scale, (
        f"{call}, then a normal step: skipped {result['skipped']!r}, scale {scales[1]!r}, expected skipped "
        f"False and the scale kept at {want_scale!r} (it grows only after 2000 good steps)")
    # The second step is one ordinary (clipped) SGD step from the untouched weights.
    _, _, want = oracle_step(state, x, y, precision, max_grad_norm)
    moved = max_param_diff(want, state)
    diff = max_param_diff(trainer.parameters(), want)
    assert diff <= (ATOL_PARAMS if precision == "fp32" else RTOL_16 * moved + ATOL_PARAMS), (
        f"{call}, then a normal step: the parameters are {diff:.3g} away from one SGD step on that batch "
        f"(which moves them by up to {moved:.3g})")

    # A good step after which update() grows the scale (growth_interval=1) was not skipped either.
    scaler = {"init_scale": 2.0**k, "growth_interval": 1}
    call = drive.describe(precision, scaler, max_grad_norm, "")
    _, results, scales = drive.run_steps(sub, state, x, y, precision, scaler, max_grad_norm, poisons=[None])
    result = drive.check_result(results[0], call)
    want_scale = oracle_scale(2.0**k, [False], growth_interval=1)
    assert result["skipped"] is False and scales[0] == want_scale, (
        f"{call}: skipped {result['skipped']!r}, scale {scales[0]!r}, expected skipped False and the scale grown "
        f"to {want_scale!r} (skipped means the optimizer did not step, not that the scale changed)")

    # A finite step that moves nothing (lr 0) was not skipped either: the scaler stepped.
    scaler = {"init_scale": 2.0**k}
    call = drive.describe(precision, scaler, max_grad_norm, " on SGD(lr=0.0)")
    trainer, results, scales = drive.run_steps(sub, state, x, y, precision, scaler, max_grad_norm, lr=0.0)
    result = drive.check_result(results[0], call)
    assert result["skipped"] is False, (
        f"{call}: skipped {result['skipped']!r}, expected False: the scaler stepped, though an lr of 0 moved nothing "
        "(skipped says whether scaler.step skipped optimizer.step(), not whether the parameters changed)")

    # Without a scaler nothing skips the step: optimizer.step() runs on the inf/NaN gradient too.
    precision = "fp32" if precision == "fp16" else precision  # fp16 is refused without a scaler
    call = drive.describe(precision, None, max_grad_norm, f" with an {poison} gradient")
    trainer, results, _ = drive.run_steps(sub, state, x, y, precision, None, max_grad_norm, poisons=[poison])
    result = drive.check_result(results[0], call)
    after = trainer.parameters()
    stepped = parameters_moved(after, state)
    assert result["skipped"] is False and stepped, (
        f"{call} returned skipped {result['skipped']!r} and left the parameters {'' if stepped else 'un'}changed, "
        "expected skipped False and the parameters changed: without a scaler optimizer.step() runs whatever the "
        "gradients hold, and skipped is always False (True only when scaler.step skipped the step)")


@pytest.mark.rule("P8.autocast", "P8.loss-in-autocast")
@pytest.mark.points(1)
@settings(max_examples=12)
@given(setup=setups(), precision=st.sampled_from(["fp32", "bf16", "fp16"]))
def test_autocast_follows_precision_and_batch_device(sub, setup, precision):
    """Forward and loss run under autocast on the batch's device in the chosen dtype (none for fp32), as the loss and update show"""
    seed, width, n = setup
    state, x, y = visible_case(seed, width, n)
    scaler = {"init_scale": 256.0} if precision == "fp16" else None
    other = "bf16" if precision == "fp32" else "fp32"
    (want, _, want_params), (theirs, _, their_params) = (oracle_step(state, x, y, p) for p in (precision, other))
    rtol = RTOL if precision == "fp32" else RTOL_16
    # A grading check of the inputs: the two precisions' losses lie far outside each other's tolerance.
    assert abs(want - theirs) > 10 * (rtol * abs(want) + 1e-12), f"inputs where {precision} and {other} agree"
    how = ("no autocast" if precision == "fp32" else
           f"torch.autocast(x.device.type, dtype={DTYPES[precision]}) around forward and loss")
    call = drive.describe(precision, scaler, None, f" on CPU tensors x = {VISIBLE_OFFSET:g} + noise, y the fp32 model's output")
    trainer, results, _ = drive.run_steps(sub, state, x, y, precision, scaler)
    result = drive.check_result(results[0], call)
    assert close(result["loss"], want, rtol), (
        f"{call} returned loss {result['loss']!r}, expected {want!r} ({how}; {other} would give {theirs!r})")
    moved = max_param_diff(want_params, state)
    diff = max_param_diff(trainer.parameters(), want_params)
    assert diff <= rtol * moved + ATOL_PARAMS, (
        f"{call}: the parameters are {diff:.3g} away from one SGD step on the gradients of that loss ({how}), "
        f"which moves them by up to {moved:.3g}; {other} moves them by {max_param_diff(their_params, state):.3g}")
    # A matmul in the loss takes the 16-bit prediction and float32 y together only inside autocast.
    call = drive.describe(precision, scaler, None, " with loss_fn = einsum('ij,ij->', prediction, y)")
    want, _, _ = oracle_step(state, x, y, precision, loss_fn=dot_loss)
    _, results, _ = drive.run_steps(sub, state, x, y, precision, scaler, loss="dot")
    assert not isinstance(results[0], wire.Raised), (
        f"{call} raised {results[0]}, expected the loss computed inside autocast too: {how}")
    got = drive.check_result(results[0], call)["loss"]
    assert close(got, want, rtol), f"{call} returned loss {got!r}, expected {want!r} ({how})"


@pytest.mark.rule("P8.unknown-precision", "P8.fp16-needs-scaler", "P8.max-grad-norm-positive")
@pytest.mark.points(1)
@settings(max_examples=3)
@given(seed=st.integers(0, 10**6), width=st.integers(4, 16), n=st.integers(2, 8))
def test_bad_arguments_raise_value_error(sub, seed, width, n):
    """fp16 without a scaler, unknown precisions and a max_grad_norm that is not positive raise ValueError
    before touching the model"""
    # The valid step beside the error cases is drawn for each example: no loss to memorize.
    state, (x, y) = model_state(seed, width), batch(seed + 1, n)
    valid = drive.check_result(drive.Trainer(sub, state).step(x, y, precision="fp32"), f"{drive.STEP}(..., precision='fp32')")
    assert close(valid["loss"], oracle_step(state, x, y)[0]), (  # error paths count only beside working code
        f"{drive.STEP}(model, (x, y), mse_loss, SGD) returned loss {valid['loss']!r}, expected {oracle_step(state, x, y)[0]!r}: "
        "a function earns its error-path points only when it also answers a valid call")
    for trainer, kwargs, attempt in drive.refused(sub, state, x, y):
        call = drive.described(trainer, kwargs)
        assert isinstance(attempt, wire.Raised) and attempt.is_a(ValueError), (
            f"{call} gave {shown(attempt)}, expected ValueError "
            f"({drive.why_refused(kwargs)})")
        diff = max_param_diff(trainer.parameters(), state)
        assert diff == 0, f"{call} changed the parameters before raising, expected them untouched"
        assert not trainer.ran(), (
            f"{call} ran the model before raising, expected the arguments checked before the model is touched")


@pytest.mark.rule("P8.checkpoint-values")
# --- checkpointed ---------------------------------------------------------------------------------

@pytest.mark.points(1)
@settings(max_examples=15)
@given(depth=st.integers(1, 4), width=st.integers(1, 16), n=st.integers(1, 8), input_grad=st.booleans(),
       dropout=st.sampled_from([0.0, 0.3]), enabled=st.booleans(), seed=st.integers(0, 1000))
def test_checkpointed_values_and_gradients(sub, depth, width, n, input_grad, dropout, enabled, seed):
    """checkpointed gives the plain forward's output and gradients (dropout and x without grad included)"""
    state = blocks_state(seed, depth, width)
    x = torch.randn(n, width, generator=torch.Generator().manual_seed(seed + 1))
    held, _ = drive.blocks(sub, drive.block(width, dropout), depth, state)
    x_held, out_held = drive.checkpointed(sub, held, x, input_grad, enabled, seed)
    call = (f"{CKPT}({depth} MLP blocks of width {width} with Dropout({dropout}), x of shape {(n, width)} "
            f"requires_grad={input_grad}, enabled={enabled})")
    got = out_held.read()
    blocks, x_oracle, out = plain_blocks_run(state, drive.block(width, dropout), depth, x, input_grad, seed)
    # The same ops in the same order: the recomputation in backward matches the forward to rounding.
    assert isinstance(got, torch.Tensor) and got.shape == out.shape and torch.allclose(got, out.detach(), rtol=1e-5, atol=1e-6), (
        f"{call} returned {shown(got) if not isinstance(got, torch.Tensor) or got.shape != out.shape else 'values up to %.3g' % (got - out.detach()).abs().max().item()} "
        "away from the plain forward's")
    assert out_held.get("requires_grad") is True, (
        f"{call} returned an output that does not require grad, expected one connected to the parameters: "
        "use_reentrant=False")
    drive.backward_of_square_sum(out_held)
    grads = drive.gradients(sub, held)
    for (name, p), grad in zip(blocks.named_parameters(), grads):
        assert grad is not None and torch.allclose(grad, p.grad, rtol=1e-4, atol=1e-6), (
            f"{call}, then backward: the gradient of {name} is "
            f"{'None' if grad is None else 'different from the plain forward'}, expected the plain forward's")
    if input_grad:
        x_grad = x_held.get("grad")
        assert x_grad is not None and torch.allclose(x_grad, x_oracle.grad, rtol=1e-4, atol=1e-6), (
            f"{call}, then backward: x's gradient differs from the plain forward's")


@pytest.mark.rule("P8.checkpoint-each-block")
@pytest.mark.points(1)
def test_checkpointed_keeps_only_block_inputs(sub):
    """checkpointed keeps about one block input per block for backward; enabled=False keeps everything"""
    # Expected: what a plain forward keeps, counted here in the judge with saved_tensors_hooks.
    # Measured: how much the memory of the worker's whole process tree grows (read by the judge from its
    # cgroup, which counts memfds, tmpfs files, kernel buffers and children too; else from /proc: sub.measure),
    # with its files on disk (sub.measure_files)
    # while the forward builds its output, after the judge had the worker's C library hand freed
    # memory back at once, and after a first run that takes one-time allocations. A forward driven by
    # the judge itself (library modules only) first shows that the measurement sees activations.
    case = checkpoint_memory()
    depth, width, plain, block_input = case.depth, case.width, case.plain, case.block_input
    call = f"{CKPT}({depth} MLP blocks of width {width}, x of shape {tuple(case.x.shape)}"
    held, blocks = drive.blocks(sub, drive.block(width), depth, case.state)
    x_held = sub.lib("torch.clone", case.x)
    calibration, _ = drive.grown_by(sub, lambda: drive.plain_forward(sub, blocks, x_held), keep=False)
    assert calibration >= MEASURABLE * plain, (
        f"the worker's memory grew by {calibration} bytes during a plain forward the judge drove, expected "
        f"about the {plain} bytes it keeps for backward: this worker's memory cannot be measured (grading problem)")
    on, output = drive.grown_by(sub, lambda: sub.new("amp.checkpointed", held, x_held, enabled=True), warm_up=True)
    missing = drive.missing_gradients(sub, held, after=output)
    assert missing == 0, f"{call}) then backward: {missing} parameters got no gradient"
    held.call("zero_grad", set_to_none=True)
    # One block input per block, plus slack (CheckpointMemory): a loop without checkpointing keeps about 5
    # block inputs' worth per block.
    bound = case.bound
    assert on <= bound, (
        f"{call}) grew the worker's memory by {on} bytes while building its output, expected at most "
        f"{bound} (about one {block_input}-byte block input per block; a plain forward keeps {plain}): "
        "wrap every block in torch.utils.checkpoint.checkpoint")
    # And at least about one block input per block: one checkpoint around the whole stack keeps only its output
    # (x is already held), and its backward recomputes every block at once. Measured here (cgroup, 6 blocks of
    # 2 MiB inputs): the reference grows by 5.98-6.10 block inputs, checkpoint_sequential by 9.95-9.98, the
    # whole stack in one checkpoint by 1.01-1.22; half of depth leaves a margin of about 2x on either side.
    floor = case.floor
    assert on >= floor, (
        f"{call}) grew the worker's memory by {on} bytes while building its output, expected at least "
        f"{floor} (about one {block_input}-byte block input per block, {depth} in all): wrap each block in its "
        "own checkpoint, not the whole stack in one (which keeps only x and recomputes everything at once)")
    off, _ = drive.grown_by(sub, lambda: sub.new("amp.checkpointed", held, x_held, enabled=False), keep=False)
    assert off >= MEASURABLE * plain, (
        f"{call}, enabled=False) grew the worker's memory by {off} bytes, expected about the plain "
        f"forward's {plain}: enabled=False runs the blocks without checkpointing")
    # A pass is a proof only where the worker's memory is a kernel memory limit's count (its cgroup charges the
    # kernel buffers of pipes, sockets and message queues: measured, grader/tests/containment/test_kernel_buffers.py);
    # the watchdog's count leaves them out, so there a failure stands and a pass is not awarded.
    if not drive.kernel_buffers_counted(sub):
        pytest.skip(drive.NO_KERNEL_COUNT)


@pytest.mark.rule("P8.train-losses", "P8.train-steps-count")
@pytest.mark.points(1)
def test_train_runs_train_step_per_batch(sub):
    """train calls get_batch once per step and returns the per-step losses of train_step, in the precision it is given"""
    state = model_state(3, 16)
    batches = [batch(seed, 8) for seed in range(5)]
    want, params = oracle_run(state, batches, lr=0.05)
    for steps in (5, 5.0):
        got = drive.train(sub, state, batches, steps, lr=0.05)  # get_batch is a judge callback
        call = f"{TRAIN}(model, get_batch, mse_loss, SGD(lr=0.05), steps={steps!r})"
        losses = got["losses"]
        assert not isinstance(losses, wire.Raised), f"{call} raised {losses}, expected a list of 5 losses"
        assert isinstance(losses, list) and len(losses) == 5 and all(type(v) is float for v in losses), (
            f"{call} returned {shown(losses)}, expected a list of 5 Python floats")
        assert all(close(g, w) for g, w in zip(losses, want)), f"{call} returned {losses}, expected {want}"
        assert got["calls"] == 5, f"{call} called get_batch {got['calls']} times, expected once per step (5)"
        assert max_param_diff(got["params"], params) <= 5 * ATOL_PARAMS, (
            f"{call}: the parameters differ from 5 SGD steps on those batches")
        assert all(got["grads_none"]), f"after {call} some .grad are not None, expected all None"
    got = drive.train(sub, state, batches, 0, lr=0.05)
    assert got["losses"] == [] and got["calls"] == 0, (
        f"{TRAIN}(..., steps=0) returned {shown(got['losses'])} after {got['calls']} get_batch calls, expected [] and 0")
    for bad in (-1, 2.5):
        got = drive.train(sub, state, batches, bad, lr=0.05)
        assert isinstance(got["losses"], wire.Raised) and got["losses"].is_a(ValueError), (
            f"{TRAIN}(..., steps={bad}) gave {shown(got['losses'])}, expected ValueError (steps is a count)")
    # The precision reaches every step: bf16 steps on a batch where its rounding shows.
    state, x, y = visible_case(3, 16, 8)
    want, params = {}, {}
    for precision in ("bf16", "fp32"):
        want[precision], params[precision] = oracle_run(state, [(x, y)] * 3, precision, lr=0.05)
    got = drive.train(sub, state, [(x, y)], 3, lr=0.05, precision="bf16")
    call = f"{TRAIN}(model, get_batch, mse_loss, SGD(lr=0.05), steps=3, precision='bf16') on x = 256 + noise"
    losses = got["losses"]
    assert isinstance(losses, list) and len(losses) == 3 and all(
        type(g) is float and close(g, w, RTOL_16) for g, w in zip(losses, want["bf16"])), (
        f"{call} returned {shown(losses)}, expected about {want['bf16']} (every step under bf16 autocast; "
        f"fp32 steps give {want['fp32']})")
    moved = max_param_diff(params["bf16"], state)
    diff = max_param_diff(got["params"], params["bf16"])
    assert diff <= RTOL_16 * moved + 5 * ATOL_PARAMS, (
        f"{call}: the parameters are {diff:.3g} away from 3 bf16 steps, which move them by up to {moved:.3g}")
    # A step the scaler skips (inf in its batch) still has its loss: one loss per step.
    state = model_state(3, 16)
    poisoned = (torch.full_like(batches[0][0], float("inf")), batches[0][1])
    want, params = oracle_run(state, batches[1:3], lr=0.05)
    got = drive.train(sub, state, [poisoned, *batches[1:3]], 3, lr=0.05, scaler={"init_scale": 8.0})
    call = (f"{TRAIN}(model, get_batch, mse_loss, SGD(lr=0.05), steps=3, scaler=GradScaler('cpu', init_scale=8.0)) "
            "with inf in the first batch")
    losses = got["losses"]
    assert isinstance(losses, list) and len(losses) == 3 and all(type(v) is float for v in losses) and not (
        math.isfinite(losses[0])) and all(close(g, w) for g, w in zip(losses[1:], want)), (
        f"{call} returned {shown(losses)}, expected 3 losses: the first not finite (the scaler skipped that step), "
        f"then {want} (one loss per step, a skipped step's too)")
    # max_grad_norm reaches every step too: one SGD step then moves no parameter by more than lr * max_grad_norm.
    state = model_state(3, 16)
    got = drive.train(sub, state, batches[:1], 1, lr=0.05, max_grad_norm=1e-4)
    moved = max_param_diff(got["params"], state)
    assert moved <= 0.05 * 1e-4 * 1.01, (
        f"{TRAIN}(model, get_batch, mse_loss, SGD(lr=0.05), steps=1, max_grad_norm=1e-4) moved a parameter by "
        f"{moved:.3g}, more than lr * max_grad_norm = {0.05 * 1e-4:.3g}: train passes max_grad_norm on to train_step")


@pytest.mark.rule("P8.checkpoint-each-block")
# --- GPU ------------------------------------------------------------------------------------------

@pytest.mark.points(1)
@pytest.mark.gpu
def test_checkpointed_lowers_peak_cuda_memory(sub):
    """On CUDA, checkpointed lowers the peak memory of forward + backward well below a plain loop"""
    # Expected: a plain loop's peak and held memory, measured in the judge process on the same GPU.
    # Measured from outside the worker, after the forward has returned (cache emptied): the device
    # memory the NVIDIA driver lists for the worker's processes (NVML) and the host memory the kernel
    # counts for them, each well under what a plain forward keeps alive, so that activations kept on
    # the GPU, or moved to the host, count. The peak torch.cuda.max_memory_allocated() reports in the
    # worker is the worker's own figure: it only words the message for an honest submission.
    depth, width, n = 16, 512, 8192
    plain_held, plain_peak = judge_plain_cuda(depth, width, n)
    got = drive.cuda_checkpointed(sub, depth, width, n)
    call = f"{CKPT}({depth} MLP blocks of width {width}, x of shape {(n, width)} on CUDA) then backward"
    assert got.missing == 0, f"{call}: {got.missing} parameters got no gradient"
    # Seen on an H100: 2404 MiB plain vs 456 MiB checkpointed; half leaves a wide margin.
    assert got.peak < 0.5 * plain_peak, (
        f"{call}: peak {got.peak >> 20} MiB (torch.cuda.max_memory_allocated in your process), expected well under "
        f"the {plain_peak >> 20} MiB of a plain loop (less than half): checkpoint every block")
    assert got.device_grown is not None, (
        f"{call}: the grader could not read the device memory of your process from outside ({got.why_no_device}): "
        "a problem of the grading machine, not of your code; tell your instructor")
    assert got.device_grown < 0.5 * plain_held, (
        f"{call}: the NVIDIA driver shows your process holding {got.device_grown >> 20} MiB more after the forward, "
        f"expected well under the {plain_held >> 20} MiB a plain forward keeps alive: checkpoint every block")
    assert got.host_grown < 0.5 * plain_held, (
        f"{call}: your process holds {got.host_grown >> 20} MiB more host memory after the forward, expected well "
        f"under the {plain_held >> 20} MiB a plain forward keeps alive: moving activations off the GPU is not "
        "checkpointing (recompute each block in backward: torch.utils.checkpoint.checkpoint)")


@pytest.mark.rule("P8.bf16-faster")
@pytest.mark.points(1)
@pytest.mark.gpu
def test_bf16_training_is_faster_than_fp32(sub):
    """On CUDA, train with precision='bf16' is clearly faster than fp32 on a matmul-heavy model"""
    # Expected: the losses of the same training run and the fp32 time, both from a plain loop in the
    # judge process. Measured: the wall time the judge sees around each train call (TF32 off on both
    # sides, so fp32 means fp32), and the losses of a warm-up on a small batch where bf16 rounding shows
    # (x = 256 + noise, y the fp32 model's output: fp32 and TF32 steps have a far smaller loss).
    dim, layers, steps, lr = 4096, 4, 10, 1e-4
    recipe = [("torch.nn.Linear", (dim, dim, False))] * layers
    batches, reference = judge_bf16_reference(recipe, dim, steps, lr)
    seconds, losses, warm_up = drive.cuda_training(sub, recipe, dim, batches["small"], steps, lr)
    call = f"{TRAIN}(4 x Linear(4096, 4096), batch 4096, 10 steps) on CUDA"
    want = reference["bf16"][2]
    assert isinstance(warm_up["bf16"], list) and len(warm_up["bf16"]) == 2 and all(
        type(v) is float and close(v, w, RTOL_16) for v, w in zip(warm_up["bf16"], want)), (
        f"{TRAIN}(4 x Linear(4096, 4096), 2 steps on x = 256 + noise, y the fp32 model's output) on CUDA with "
        f"precision='bf16' returned {shown(warm_up['bf16'])}, expected about {want} (bf16 rounding; fp32 steps give "
        f"{reference['fp32'][2]})")
    want = reference["bf16"][1]
    assert isinstance(losses["bf16"], list) and len(losses["bf16"]) == steps and all(
        type(v) is float and close(v, w, RTOL_16) for v, w in zip(losses["bf16"], want)), (
        f"{call} with precision='bf16' returned losses {shown(losses['bf16'])}, expected about {want} "
        "(the same steps run in the judge)")
    fp32 = min(seconds["fp32"], reference["fp32"][0])
    # bf16 tensor cores run ~15x the fp32 rate (TF32 off); with casts and elementwise work a correct loop is
    # 3-10x faster. 0.6 is a wide band that only an implementation not using bf16 matmuls fails.
    assert seconds["bf16"] < 0.6 * fp32, (
        f"{call}: bf16 took {seconds['bf16']:.3f} s (wall time seen by the judge), fp32 {seconds['fp32']:.3f} s "
        f"(a plain fp32 loop in the judge: {reference['fp32'][0]:.3f} s); expected bf16 under 0.6x the fp32 time")
