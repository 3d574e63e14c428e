"""Public tests for P8 (amp.py): autocast, gradient scaling and clipping, activation checkpointing."""

from __future__ import annotations

import copy
import math
import time

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from _kit import call, check_close, check_equal, check_raises, check_true, describe_call

STEP = "amp.train_step"
CKPT = "amp.checkpointed"
TRAIN = "amp.train"
# No "explain" phase: on a failing example it replays the test hundreds of times (slow with torch).


def make_model(seed: int = 0, width: int = 32) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(8, width), torch.nn.GELU(), torch.nn.Linear(width, 4))


def make_batch(seed: int = 1, n: int = 16) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randn(n, 8, generator=generator), torch.randn(n, 4, generator=generator)


def manual_step(model: torch.nn.Module, batch, lr: float, max_grad_norm: float | None = None) -> tuple[float, float | None]:
    """The oracle: fp32 forward, backward, torch's clip_grad_norm_, a plain SGD update."""
    x, y = batch
    loss = F.mse_loss(model(x), y)
    loss.backward()
    norm = None
    if max_grad_norm is not None:
        norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm))
    with torch.no_grad():
        for p in model.parameters():
            p -= lr * p.grad
    model.zero_grad(set_to_none=True)
    return loss.item(), norm


def max_diff(a: torch.nn.Module, b: torch.nn.Module) -> float:
    return max((p - q).abs().max().item() for p, q in zip(a.parameters(), b.parameters()))


def record_linear_dtypes(model: torch.nn.Module) -> tuple[list[torch.dtype], list]:
    """Forward hooks that note the dtype each Linear layer produced."""
    seen: list[torch.dtype] = []
    handles = [m.register_forward_hook(lambda mod, inp, out: seen.append(out.dtype))
               for m in model.modules() if isinstance(m, torch.nn.Linear)]
    return seen, handles

SCALERS = {"no scaler": None, "GradScaler('cpu', init_scale=2**16)": 2.0**16}


def scaler_of(init_scale: float | None) -> torch.amp.GradScaler | None:
    return None if init_scale is None else torch.amp.GradScaler("cpu", init_scale=init_scale)


@pytest.mark.rule("P8.loss-float", "P8.scaled-backward")
@pytest.mark.parametrize("scaler", SCALERS)
def test_step_matches_a_manual_step(amp, scaler):
    model, oracle, batch = make_model(), make_model(), make_batch()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    got = call(amp.train_step, model, batch, F.mse_loss, optimizer, scaler=scaler_of(SCALERS[scaler]))
    want_loss, _ = manual_step(oracle, batch, lr=0.1)
    what = f"{STEP}(fp32, {scaler})"
    check_true(isinstance(got, dict) and set(got) == {"loss", "grad_norm", "skipped"}, what, got,
               "a dict with keys 'loss', 'grad_norm', 'skipped'", STEP)
    check_true(type(got["loss"]) is float and abs(got["loss"] - want_loss) <= 1e-6 * abs(want_loss), what,
               got["loss"], f"the float loss {want_loss} (loss_fn(model(x), y) before the update, unscaled)", STEP)
    check_true(max_diff(model, oracle) < 1e-6, f"{what} with SGD(lr=0.1)", f"max |difference| {max_diff(model, oracle):.3g}",
               "the parameters of one SGD step on the gradients of that loss (a scaler scales the loss for "
               "backward once, and scaler.step unscales the gradients)", STEP)


@pytest.mark.rule("P8.grads-none")
def test_gradients_of_a_parameter_outside_the_model_are_none_afterwards(amp):
    """The optimizer's parameters, not the model's: a learnable temperature in the loss is cleared too."""
    model, temperature = make_model(), torch.nn.Parameter(torch.tensor(2.0))
    optimizer = torch.optim.SGD([*model.parameters(), temperature], lr=0.1)
    call(amp.train_step, model, make_batch(), lambda out, y: F.mse_loss(out * temperature, y), optimizer)
    check_true(temperature.grad is None, f"{STEP}(model, batch, mse of output * temperature, SGD over the model's "
               "parameters and temperature)", f"temperature.grad = {temperature.grad}", "None: the optimizer holds it",
               STEP, hint="optimizer.zero_grad(set_to_none=True) clears every parameter the optimizer holds; "
               "model.zero_grad reaches only the model's")


@pytest.mark.rule("P8.grads-none")
@pytest.mark.parametrize("max_grad_norm", [None, 1.0])
@pytest.mark.parametrize("scaler, poison", [("no scaler", None), ("GradScaler('cpu', init_scale=2**16)", None),
                                            ("GradScaler('cpu', init_scale=2**16)", "inf")],
                         ids=["no scaler", "scaler", "scaler, skipped step"])
def test_gradients_are_none_afterwards(amp, scaler, poison, max_grad_norm):
    """Every path ends with the gradients gone: a step the scaler skips (an inf gradient) too."""
    model = make_model()
    if poison is not None:
        model[0].weight.register_hook(lambda grad: torch.full_like(grad, float(poison)))
    got = call(amp.train_step, model, make_batch(), F.mse_loss, torch.optim.SGD(model.parameters(), lr=0.1),
               scaler=scaler_of(SCALERS[scaler]), max_grad_norm=max_grad_norm)
    grads = [p.grad for p in model.parameters()]
    what = f"{STEP}(fp32, {scaler}, max_grad_norm={max_grad_norm})" + (f" with an {poison} gradient" if poison else "")
    check_true(all(g is None for g in grads), what, [None if g is None else "a tensor" for g in grads],
               "every .grad None afterwards: optimizer.zero_grad(set_to_none=True)"
               + (f", after a skipped step too (skipped: {got.get('skipped') if isinstance(got, dict) else got!r})"
                  if poison else ""), STEP,
               hint="zero the gradients on every path, also when the scaler skipped the step" if poison else "")


def norm_hint(got: float, want: float, scale: float, max_grad_norm: float, moved: float, want_moved: float) -> str:
    """The mistake a wrong grad_norm shows, named by how it relates to torch's norm and to the step made."""
    if math.isclose(got, want * scale, rel_tol=1e-3):
        if moved < want_moved / 16:  # clipped while `scale` times too large, then unscaled: a step `scale` times too small
            return (f"grad_norm is exactly the scale ({scale:g}) times torch's and the step that much too small: "
                    "clip_grad_norm_ ran on the scaled gradients; call scaler.unscale_(optimizer) before it")
        return (f"grad_norm is exactly the scale ({scale:g}) times torch's, yet the step is not that much too small "
                "(clipping ran after unscale_): the gradients were scaled twice (scaler.scale applied to a loss that "
                "was already scaled); backward through scaler.scale(loss) once")
    if math.isclose(got, min(want, max_grad_norm), rel_tol=1e-4):
        return "grad_norm is the norm after clipping: report the value clip_grad_norm_ returns, before clipping"
    return ""


@pytest.mark.rule("P8.grad-norm", "P8.scaled-backward")
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 1000), max_grad_norm=st.floats(0.01, 10.0), scaled=st.booleans())
def test_grad_norm_is_measured_on_unscaled_grads_before_clipping(amp, seed, max_grad_norm, scaled):
    model, oracle, batch = make_model(seed), make_model(seed), make_batch(seed + 1)
    start = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scale = 2.0**16 if scaled else None
    got = call(amp.train_step, model, batch, F.mse_loss, optimizer, scaler=scaler_of(scale), max_grad_norm=max_grad_norm)
    _, want_norm = manual_step(oracle, batch, lr=0.1, max_grad_norm=max_grad_norm)
    what = f"{STEP}(..., scaler={'GradScaler(cpu, init_scale=2**16)' if scaled else None}, max_grad_norm={max_grad_norm})"
    norm = got["grad_norm"]
    ok = type(norm) is float and abs(norm - want_norm) <= 1e-4 * want_norm
    check_true(ok, what, norm, f"{want_norm} (torch's clip_grad_norm_ before clipping, on unscaled gradients)", STEP,
               hint="" if ok or type(norm) is not float else norm_hint(
                   norm, want_norm, scale or 1.0, max_grad_norm, max_diff(model, start), max_diff(oracle, start)))


@pytest.mark.rule("P8.grad-norm")
def test_grad_norm_is_none_without_max_grad_norm(amp):
    model = make_model()
    got = call(amp.train_step, model, make_batch(), F.mse_loss, torch.optim.SGD(model.parameters(), lr=0.1))
    check_true(got["grad_norm"] is None, f"{STEP}(..., max_grad_norm=None)", got["grad_norm"],
               "None: without max_grad_norm nothing is clipped or measured", STEP)


@pytest.mark.rule("P8.unscale-before-clip")
@pytest.mark.parametrize("scaler", SCALERS)
def test_the_step_uses_the_clipped_true_gradients(amp, scaler):
    model, oracle, batch = make_model(3), make_model(3), make_batch(4)
    probe = make_model(3)
    F.mse_loss(probe(batch[0]), batch[1]).backward()
    max_grad_norm = 0.5 * float(torch.nn.utils.clip_grad_norm_(probe.parameters(), math.inf))
    call(amp.train_step, model, batch, F.mse_loss, torch.optim.SGD(model.parameters(), lr=0.1),
         scaler=scaler_of(SCALERS[scaler]), max_grad_norm=max_grad_norm)
    manual_step(oracle, batch, lr=0.1, max_grad_norm=max_grad_norm)
    check_true(max_diff(model, oracle) < 1e-6, f"{STEP}(..., {scaler}, max_grad_norm={max_grad_norm:.4g}: half the norm)",
               f"parameters off by {max_diff(model, oracle):.3g}",
               "the parameters of an SGD step with the true gradients clipped to that norm", STEP,
               "with a scaler, scaler.unscale_(optimizer) first, then clip_grad_norm_ over the optimizer's parameters")


# The layers of make_model the SGD holds, one param group per layer.
HELD = {"last layer only": (2,), "one group per layer": (0, 2)}


@pytest.mark.rule("P8.unscale-before-clip", "P8.grad-norm")
@pytest.mark.parametrize("scaler", SCALERS)
@pytest.mark.parametrize("held", HELD)
def test_clipping_covers_every_param_group_of_the_optimizer_only(amp, held, scaler):
    """Clipping and grad_norm cover the parameters of every param group, and no other parameter.

    With model[2] alone, model[0]'s gradients are computed but are not the optimizer's: they count neither in
    grad_norm nor in the clipping. With one group per layer, both layers' gradients count and are clipped."""
    layers = HELD[held]
    model, oracle, batch = make_model(5), make_model(5), make_batch(6)
    F.mse_loss(oracle(batch[0]), batch[1]).backward()
    params = [p for i in layers for p in oracle[i].parameters()]
    want_norm = float(torch.nn.utils.get_total_norm([p.grad for p in params]))
    max_grad_norm = 0.5 * want_norm
    torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    with torch.no_grad():
        for p in params:
            p -= 0.1 * p.grad
    optimizer = torch.optim.SGD([{"params": model[i].parameters()} for i in layers], lr=0.1)
    got = call(amp.train_step, model, batch, F.mse_loss, optimizer, scaler=scaler_of(SCALERS[scaler]),
               max_grad_norm=max_grad_norm)
    groups = ", ".join(f"{{'params': model[{i}].parameters()}}" for i in layers)
    names = " and ".join(f"model[{i}]" for i in layers)
    what = f"{STEP}(model, ..., SGD([{groups}], lr=0.1), {scaler}, max_grad_norm={max_grad_norm:.4g}: half the norm)"
    hint = ("clip_grad_norm_ over the parameters of every group of optimizer.param_groups (not model.parameters(), "
            "not the first group's alone)")
    check_true(isinstance(got["grad_norm"], float) and math.isclose(got["grad_norm"], want_norm, rel_tol=1e-5),
               what, got, f"grad_norm {want_norm:.6g}: the total norm of the gradients of all the optimizer's "
               "parameters, before clipping", STEP, hint=hint)
    check_true(max_diff(model, oracle) < 1e-6, what, f"parameters off by {max_diff(model, oracle):.3g}",
               f"the optimizer's parameters ({names}'s) updated with their gradients clipped together to "
               "max_grad_norm, the others unchanged", STEP, hint=hint)


@pytest.mark.rule("P8.scaler-step-update")
@pytest.mark.parametrize("max_grad_norm", [None, 1.0])
def test_inf_gradient_skips_the_step_and_halves_the_scale(amp, max_grad_norm):
    model, batch = make_model(), make_batch()
    before = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    handle = model[0].weight.register_hook(lambda grad: torch.full_like(grad, float("inf")))
    call(amp.train_step, model, batch, F.mse_loss, optimizer, scaler=scaler, max_grad_norm=max_grad_norm)
    handle.remove()
    what = f"{STEP}(..., max_grad_norm={max_grad_norm}) with an inf gradient and GradScaler('cpu', init_scale=1024)"
    check_true(max_diff(model, before) == 0, what, "changed parameters", "the parameters unchanged", STEP)
    check_equal(scaler.get_scale, expected=512.0, why="scaler.update() after a skipped step halves the scale")
    call(amp.train_step, model, batch, F.mse_loss, optimizer, scaler=scaler)
    check_true(max_diff(model, before) > 0, f"{what}, then a normal step", "unchanged parameters",
               "the parameters updated", STEP)


@pytest.mark.rule("P8.skipped")
@pytest.mark.parametrize("poison", ["inf", "nan"])
def test_skipped_says_whether_the_scaler_stepped(amp, poison):
    model, batch = make_model(), make_batch()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0, growth_interval=1)
    handle = model[0].weight.register_hook(lambda grad: torch.full_like(grad, float(poison)))
    got = call(amp.train_step, model, batch, F.mse_loss, optimizer, scaler=scaler)
    handle.remove()
    what = "GradScaler('cpu', init_scale=1024, growth_interval=1)"
    check_true(got["skipped"] is True, f"{STEP}(...) with an {poison} gradient and {what}", got, "skipped True: the "
               "scaler skips a step on an inf or a NaN gradient", STEP, hint="compare scaler.get_scale() before step and "
               "after update: update() lowers it exactly when the scaler found an inf/NaN")
    got = call(amp.train_step, model, batch, F.mse_loss, optimizer, scaler=scaler)
    check_true(got["skipped"] is False, f"{STEP}(...) with finite gradients and {what} (the scale grows)", got,
               "skipped False: the optimizer stepped, although update() changed the scale", STEP)
    got = call(amp.train_step, model, batch, F.mse_loss, optimizer)
    check_true(got["skipped"] is False, f"{STEP}(...) without a scaler", got, "skipped False", STEP)
    before = copy.deepcopy(model)
    got = call(amp.train_step, model, batch, F.mse_loss, torch.optim.SGD(model.parameters(), lr=0.0),
               scaler=torch.amp.GradScaler("cpu", init_scale=1024.0))
    check_true(got["skipped"] is False and max_diff(model, before) == 0,
               f"{STEP}(..., SGD(lr=0.0), GradScaler('cpu', init_scale=1024)) with finite gradients", got,
               "skipped False: the scaler stepped (an lr of 0 moves nothing, but the step was not skipped)", STEP,
               hint="skipped says whether scaler.step skipped optimizer.step(), not whether the parameters moved: "
               "compare the scale before and after update()")


@pytest.mark.rule("P8.grad-norm")
@pytest.mark.parametrize("with_scaler", [True, False], ids=["scaler", "no scaler"])
@pytest.mark.parametrize("poison", ["inf", "nan"])
def test_grad_norm_of_a_non_finite_gradient_is_not_finite(amp, poison, with_scaler):
    model, batch = make_model(), make_batch()
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0) if with_scaler else None
    model[0].weight.register_hook(lambda grad: torch.full_like(grad, float(poison)))
    got = call(amp.train_step, model, batch, F.mse_loss, torch.optim.SGD(model.parameters(), lr=0.1), scaler=scaler,
               max_grad_norm=1.0)
    norm = got["grad_norm"]
    check_true(isinstance(norm, float) and not math.isfinite(norm),
               f"{STEP}(..., scaler={'GradScaler' if with_scaler else 'None'}, max_grad_norm=1.0) with an {poison} "
               "gradient", got, "grad_norm the float clip_grad_norm_ returned (inf or nan here), whether or not the "
               "step is then skipped", STEP, hint="with max_grad_norm, grad_norm is always the norm clip_grad_norm_ "
               "returns; None only when no max_grad_norm is given")


@pytest.mark.rule("P8.skipped", "P8.scaler-step-update")
@pytest.mark.parametrize("max_grad_norm", [None, 1.0])
@pytest.mark.parametrize("poison", ["inf", "nan"])
def test_skipped_is_false_without_a_scaler(amp, poison, max_grad_norm):
    """Without a scaler nothing skips the step: optimizer.step() runs even on an inf/NaN gradient."""
    model, batch = make_model(), make_batch()
    before = copy.deepcopy(model)
    model[0].weight.register_hook(lambda grad: torch.full_like(grad, float(poison)))
    got = call(amp.train_step, model, batch, F.mse_loss, torch.optim.SGD(model.parameters(), lr=0.1),
               max_grad_norm=max_grad_norm)
    stepped = any(not torch.equal(p, q) for p, q in zip(model.parameters(), before.parameters()))
    check_true(got["skipped"] is False and stepped, f"{STEP}(..., scaler=None, max_grad_norm={max_grad_norm}) with "
               f"an {poison} gradient", f"skipped {got['skipped']!r}, parameters {'' if stepped else 'un'}changed",
               "skipped False and the parameters changed: without a scaler, optimizer.step() runs whatever the "
               "gradients hold", STEP, hint="skipped is True only when scaler.step skipped the step; without a "
               "scaler it is always False (do not test the gradients for inf/NaN yourself)")


@pytest.mark.rule("P8.autocast")
@pytest.mark.parametrize("precision, dtype", [("fp32", torch.float32), ("bf16", torch.bfloat16), ("fp16", torch.float16)])
def test_autocast_dtype_follows_precision(amp, precision, dtype):
    model, batch = make_model(), make_batch()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler = torch.amp.GradScaler("cpu") if precision == "fp16" else None
    seen, handles = record_linear_dtypes(model)
    got = call(amp.train_step, model, batch, F.mse_loss, optimizer, scaler=scaler, precision=precision)
    for handle in handles:
        handle.remove()
    what = f"{STEP}(..., precision={precision!r}) on CPU tensors"
    check_true(seen == [dtype, dtype], what, f"Linear outputs {seen}", f"Linear outputs in {dtype}: "
               "torch.autocast on the batch's device type (here 'cpu') with that dtype, none for fp32", STEP)
    want, _ = manual_step(make_model(), batch, lr=0.01)
    check_true(type(got["loss"]) is float and abs(got["loss"] - want) < 2e-2 * want, what, got["loss"],
               f"close to the fp32 loss {want} (16-bit matmuls round to 8 or 11 significant bits)", STEP)


@pytest.mark.rule("P8.loss-in-autocast")
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_loss_is_computed_under_autocast(amp, precision):
    model, (x, y) = make_model(), make_batch()
    scaler = torch.amp.GradScaler("cpu") if precision == "fp16" else None

    def dot_loss(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return torch.einsum("ij,ij->", prediction, target) / target.numel()  # a matmul: autocast casts both inputs

    got = call(amp.train_step, model, (x, y), dot_loss, torch.optim.SGD(model.parameters(), lr=0.01), scaler=scaler,
               precision=precision)
    want = dot_loss(make_model()(x), y).item()
    check_true(abs(got["loss"] - want) < 2e-2 * abs(want) + 1e-3, f"{STEP}(..., loss_fn=einsum loss, precision={precision!r})",
               got["loss"], f"close to {want}: the loss computed inside autocast (outside it, einsum gets a 16-bit "
               "prediction and a float32 target)", STEP)


@pytest.mark.rule("P8.params-float32")
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_parameters_stay_float32(amp, precision):
    model = make_model()
    scaler = torch.amp.GradScaler("cpu") if precision == "fp16" else None
    call(amp.train_step, model, make_batch(), F.mse_loss, torch.optim.SGD(model.parameters(), lr=0.01), scaler=scaler,
         precision=precision)
    dtypes = {p.dtype for p in model.parameters()}
    check_true(dtypes == {torch.float32}, f"{STEP}(..., precision={precision!r})", f"parameter dtypes {dtypes}",
               "float32 parameters: autocast computes in 16 bits, the model is never cast", STEP)
    # Their values keep every float32 bit: a step with lr=0 leaves them exactly as they were (a model cast to 16 bits
    # and back to float32 is float32 again, rounded).
    before = copy.deepcopy(model)
    scaler = torch.amp.GradScaler("cpu") if precision == "fp16" else None
    call(amp.train_step, model, make_batch(), F.mse_loss, torch.optim.SGD(model.parameters(), lr=0.0), scaler=scaler,
         precision=precision)
    changed = [name for (name, p), q in zip(model.named_parameters(), before.parameters()) if not torch.equal(p, q)]
    check_true(not changed, f"{STEP}(..., SGD(lr=0.0), precision={precision!r})",
               f"parameters {changed} changed (by up to {max_diff(model, before):.3g})",
               "every parameter bit for bit as it was: lr=0 moves nothing, and the float32 master weights are never "
               "rounded to 16 bits", STEP, hint="never cast the model (.half(), .bfloat16(), .to(dtype)), not even and "
               "back: autocast casts copies for its matmuls")


def check_refused(amp, **kwargs) -> None:
    model = make_model()
    before = copy.deepcopy(model)
    forwards = []
    model.register_forward_pre_hook(lambda module, args: forwards.append(args))
    check_raises(ValueError, amp.train_step, model, make_batch(), F.mse_loss,
                 torch.optim.SGD(model.parameters(), lr=0.1), **kwargs)
    check_true(max_diff(model, before) == 0, describe_call(amp.train_step, (), kwargs), "changed parameters",
               "the parameters untouched: the arguments are checked before the step", STEP)
    check_true(not forwards, describe_call(amp.train_step, (), kwargs), f"ran the model {len(forwards)} time(s)",
               "the model not run: the arguments are checked before the model is touched", STEP)


@pytest.mark.rule("P8.unknown-precision")
@pytest.mark.parametrize("precision", ["fp8", "float32", "BF16", "FP16", "Fp32"])
def test_unknown_precision_raises(amp, precision):
    """The names are exact: "BF16" is not "bf16" (with a scaler, so that only the name is wrong)."""
    check_refused(amp, precision=precision, scaler=torch.amp.GradScaler("cpu"))


@pytest.mark.rule("P8.fp16-needs-scaler")
def test_fp16_without_a_scaler_raises(amp):
    check_refused(amp, precision="fp16")


@pytest.mark.rule("P8.max-grad-norm-positive")
@pytest.mark.parametrize("max_grad_norm", [0.0, -1.0, float("nan")])
def test_max_grad_norm_not_positive_raises(amp, max_grad_norm):
    check_refused(amp, max_grad_norm=max_grad_norm)


def make_blocks(depth: int, width: int, seed: int) -> torch.nn.ModuleList:
    torch.manual_seed(seed)
    return torch.nn.ModuleList(torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(),
                                                   torch.nn.Linear(2 * width, width)) for _ in range(depth))


@pytest.mark.rule("P8.checkpoint-values")
@settings(max_examples=10, deadline=None)
@given(depth=st.integers(1, 4), width=st.integers(2, 16), input_grad=st.booleans(), seed=st.integers(0, 100))
def test_checkpointed_gives_the_same_values_and_gradients(amp, depth, width, input_grad, seed):
    blocks = make_blocks(depth, width, seed)
    x = torch.randn(5, width, requires_grad=input_grad)
    plain = x
    for block in blocks:
        plain = block(plain)
    plain.square().sum().backward()
    want = [p.grad.clone() for p in blocks.parameters()]
    want_x = None if x.grad is None else x.grad.clone()
    blocks.zero_grad(set_to_none=True)
    x.grad = None
    out = check_close(amp.checkpointed, blocks, x, expected=plain.detach(), rtol=1e-6, atol=1e-6)
    what = f"{CKPT}({depth} blocks of width {width}, x with requires_grad={input_grad})"
    check_true(out.requires_grad, what, "an output that does not require grad",
               "an output connected to the parameters (use_reentrant=False works even when x needs no grad)", CKPT)
    out.square().sum().backward()
    got = [p.grad for p in blocks.parameters()]
    check_true(all(g is not None and torch.allclose(g, w, rtol=1e-5, atol=1e-6) for g, w in zip(got, want)), what,
               "different parameter gradients", "the gradients of the plain forward", CKPT)
    if input_grad:
        check_true(x.grad is not None and torch.allclose(x.grad, want_x, rtol=1e-5, atol=1e-6), what,
                   "x.grad None" if x.grad is None else "a different x.grad", "x.grad as the plain forward gives it",
                   CKPT, hint="do not detach x: checkpoint(block, x, use_reentrant=False) keeps it in the graph")


def saved_bytes(fn, blocks: torch.nn.Module, x: torch.Tensor) -> int:
    """Bytes autograd keeps for backward while running fn(blocks, x): distinct storages, parameters excluded."""
    params = {p.untyped_storage().data_ptr() for p in blocks.parameters()}
    kept: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            kept[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = fn(blocks, x)
    out.sum().backward()
    return sum(kept.values())


@pytest.mark.rule("P8.checkpoint-each-block")
def test_checkpointed_saves_fewer_activations(amp):
    blocks, x = make_blocks(depth=6, width=64, seed=0), torch.randn(256, 64)
    on = saved_bytes(lambda b, v: call(amp.checkpointed, b, v), blocks, x)
    off = saved_bytes(lambda b, v: call(amp.checkpointed, b, v, enabled=False), blocks, x)
    block_input = x.numel() * x.element_size()
    check_true(off >= 3 * 6 * block_input, f"{CKPT}(6 blocks, x, enabled=False)", f"{off} bytes saved for backward",
               f"at least {3 * 6 * block_input}: a plain forward saves each layer's activations", CKPT)
    # About one block input per block (torch.utils.checkpoint.checkpoint_sequential, which runs its last
    # segment plainly, is accepted too: the bound leaves room for one un-checkpointed block).
    bound = 6 * block_input + off // 6
    check_true(on <= bound, f"{CKPT}(6 blocks, x)", f"{on} bytes saved for backward",
               f"at most {bound} (about one block input per block) instead of {off}: checkpoint every block", CKPT)
    # And at least about one block input per block: one checkpoint around the whole stack keeps only x (1 block
    # input; checkpointing each block keeps 6), and its backward recomputes every block at once.
    floor = 6 * block_input // 2
    check_true(on >= floor, f"{CKPT}(6 blocks, x)", f"{on} bytes saved for backward ({on / block_input:g} block inputs)",
               f"at least {floor} (about one {block_input}-byte block input per block, 6 in all): wrap each block in "
               "its own checkpoint, not the whole stack in one", CKPT)


@pytest.mark.rule("P8.train-losses")
def test_train_returns_the_per_step_losses(amp):
    model, oracle = make_model(), make_model()
    batches = [make_batch(seed) for seed in range(4)]
    queue = iter(batches)
    got = call(amp.train, model, lambda: next(queue), F.mse_loss, torch.optim.SGD(model.parameters(), lr=0.05), 4.0)
    want = [manual_step(oracle, batch, lr=0.05)[0] for batch in batches]
    check_true(isinstance(got, list) and len(got) == 4 and all(type(v) is float for v in got)
               and all(abs(g - w) <= 1e-5 * w for g, w in zip(got, want)), f"{TRAIN}(..., steps=4.0)", got,
               f"the losses of 4 steps, {want}", TRAIN)
    seen, handles = record_linear_dtypes(model)
    scaler = torch.amp.GradScaler("cpu", init_scale=8.0)
    call(amp.train, model, lambda: batches[0], F.mse_loss, torch.optim.SGD(model.parameters(), lr=0.05), 2,
         precision="fp16", scaler=scaler)
    for handle in handles:
        handle.remove()
    check_true(seen == [torch.float16] * 4, f"{TRAIN}(..., steps=2, precision='fp16', scaler=GradScaler('cpu'))",
               f"Linear outputs {seen}", "Linear outputs in torch.float16 on both steps: train passes precision, "
               "scaler and max_grad_norm on to train_step", TRAIN)
    # A step the scaler skips still has its loss: a batch holding inf makes the loss and gradients non-finite.
    model, oracle = make_model(), make_model()
    poisoned = (torch.full_like(batches[0][0], float("inf")), batches[0][1])
    queue = iter([poisoned, *batches[1:3]])
    got = call(amp.train, model, lambda: next(queue), F.mse_loss, torch.optim.SGD(model.parameters(), lr=0.05), 3,
               scaler=torch.amp.GradScaler("cpu", init_scale=8.0))
    want = [manual_step(oracle, batch, lr=0.05)[0] for batch in batches[1:3]]
    check_true(isinstance(got, list) and len(got) == 3 and all(type(v) is float for v in got)
               and not math.isfinite(got[0]) and all(abs(g - w) <= 1e-5 * w for g, w in zip(got[1:], want)),
               f"{TRAIN}(..., steps=3, scaler=GradScaler('cpu', init_scale=8)) with inf in the first batch", got,
               f"3 losses: the first not finite (the scaler skipped that step), then {want}", TRAIN,
               hint="one loss per step, a skipped step's too")
    before = [p.detach().clone() for p in model.parameters()]
    call(amp.train, model, lambda: batches[0], F.mse_loss, torch.optim.SGD(model.parameters(), lr=0.05), 1,
         max_grad_norm=1e-4)
    moved = max(float((p.detach() - b).abs().max()) for p, b in zip(model.parameters(), before))
    check_true(moved <= 0.05 * 1e-4 * 1.01, f"{TRAIN}(..., SGD(lr=0.05), steps=1, max_grad_norm=1e-4)",
               f"a parameter moved by {moved:.3g}", f"no parameter moved by more than lr * max_grad_norm = 5e-06: "
               "train passes max_grad_norm on to train_step", TRAIN)


@pytest.mark.rule("P8.train-steps-count", "P8.train-losses")
@pytest.mark.parametrize("steps", [0, 0.0])
def test_train_of_zero_steps(amp, steps):
    """0 is a count: no step, no batch drawn, no loss."""
    model = make_model()
    drawn = []
    got = call(amp.train, model, lambda: drawn.append(1) or make_batch(), F.mse_loss,
               torch.optim.SGD(model.parameters(), lr=0.05), steps)
    check_true(got == [] and not drawn, f"{TRAIN}(..., steps={steps!r})", f"{got!r} after {len(drawn)} get_batch calls",
               "[] and no get_batch call: steps is a count, and 0 steps is a loop that does not run", TRAIN,
               hint="only a negative or non-whole steps is refused (as_count)")


@pytest.mark.rule("P8.train-steps-count")
@pytest.mark.parametrize("steps", [-1, 2.5])
def test_train_refuses_a_bad_step_count(amp, steps):
    model = make_model()
    check_raises(ValueError, amp.train, model, lambda: make_batch(), F.mse_loss,
                 torch.optim.SGD(model.parameters(), lr=0.05), steps, why="steps is a count: a whole number >= 0")


@pytest.mark.rule("P8.checkpoint-each-block")
@pytest.mark.gpu
def test_checkpointed_lowers_peak_cuda_memory(amp):
    blocks = make_blocks(depth=16, width=512, seed=0).cuda()
    x = torch.randn(8192, 512, device="cuda")

    def peak(enabled: bool) -> int:
        for _ in range(2):  # the first run warms up the allocator and the kernels
            blocks.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            call(amp.checkpointed, blocks, x, enabled=enabled).square().mean().backward()
            torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated()

    plain, checkpointed = peak(False), peak(True)
    check_true(checkpointed < 0.5 * plain, f"{CKPT}(16 blocks, 8192x512 on CUDA)", f"peak {checkpointed >> 20} MiB",
               f"well under the {plain >> 20} MiB of enabled=False", CKPT)


@pytest.mark.rule("P8.bf16-faster")
@pytest.mark.gpu
def test_bf16_is_faster_than_fp32_on_cuda(amp):
    def seconds(precision: str) -> float:
        torch.manual_seed(0)
        model = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096, bias=False) for _ in range(4)]).cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
        x, y = torch.randn(4096, 4096, device="cuda"), torch.randn(4096, 4096, device="cuda")
        call(amp.train, model, lambda: (x, y), F.mse_loss, optimizer, 2, precision=precision)  # warm-up
        torch.cuda.synchronize()
        start = time.perf_counter()
        call(amp.train, model, lambda: (x, y), F.mse_loss, optimizer, 10, precision=precision)
        torch.cuda.synchronize()
        return time.perf_counter() - start

    allow_tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # true fp32 matmuls, as the lecture compares
    try:
        fp32, bf16 = seconds("fp32"), seconds("bf16")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    check_true(bf16 < 0.6 * fp32, f"{TRAIN}(4 Linear(4096, 4096), 10 steps, precision='bf16') on CUDA",
               f"{bf16:.3f} s", f"clearly less than the {fp32:.3f} s of fp32 (bf16 tensor cores)", TRAIN)
