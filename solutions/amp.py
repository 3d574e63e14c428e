"""P8: a mixed precision training loop, gradient scaling and activation checkpointing.

Mixed precision keeps the parameters (and the optimizer's state) in float32 and runs the
forward pass under ``torch.autocast``, which casts the inputs of matmul-like operations to a
16-bit dtype and keeps precision-sensitive ones (losses, reductions) in float32. float16 has
a narrow exponent range, so small gradients underflow to zero: the loss is multiplied by a
large scale before backward, and the gradients divided by it again before the optimizer
step (``torch.amp.GradScaler``). bfloat16 has float32's range and needs no scaling.
Activation checkpointing trades compute for memory: a checkpointed block keeps only its input
and recomputes its inner activations during the backward pass.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence

import torch
from torch.utils.checkpoint import checkpoint

from ._counts import as_count

Batch = tuple[torch.Tensor, torch.Tensor]
LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

# BEGIN SOLUTION
_AUTOCAST_DTYPES = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def _optimizer_params(optimizer: torch.optim.Optimizer) -> Iterable[torch.Tensor]:
    return (p for group in optimizer.param_groups for p in group["params"])
# END SOLUTION


def train_step(model: torch.nn.Module, batch: Batch, loss_fn: LossFn, optimizer: torch.optim.Optimizer,
               scaler: torch.amp.GradScaler | None = None, precision: str = "fp32",
               max_grad_norm: float | None = None) -> dict:
    """One optimizer step on ``batch = (x, y)`` with loss ``loss_fn(model(x), y)``.

    ``precision`` is "fp32" (no autocast), "bf16" or "fp16": forward and loss run under
    ``torch.autocast(x.device.type, dtype)``; the parameters stay float32. With a ``scaler``
    (a ``torch.amp.GradScaler``) the backward pass goes through ``scaler.scale(loss)``,
    then ``scaler.unscale_(optimizer)`` (when clipping), ``scaler.step(optimizer)`` and
    ``scaler.update()``. With ``max_grad_norm`` the gradients of the optimizer's parameters
    are clipped with ``torch.nn.utils.clip_grad_norm_`` and "grad_norm" is their total norm
    BEFORE clipping, computed on UNSCALED gradients (None without ``max_grad_norm``).
    Afterwards every gradient is None (``zero_grad(set_to_none=True)``).

    Returns ``{"loss": float, "grad_norm": float | None, "skipped": bool}``; "skipped" is True
    when the scaler found an inf/NaN gradient and did not step (detected as ``update()``
    lowering the scale, as Hugging Face accelerate does).

    Raises:
        ValueError: before the model is touched: an unknown ``precision`` (anything but "fp32",
            "bf16", "fp16"). [P8.unknown-precision] Also "fp16" without a scaler (its gradients would
            underflow). [P8.fp16-needs-scaler] Also a ``max_grad_norm`` that is not a positive number
            (0, negative numbers and NaN included; inf is not graded). [P8.max-grad-norm-positive]
    """
    # BEGIN SOLUTION
    if precision not in _AUTOCAST_DTYPES:
        raise ValueError(f"precision must be one of {sorted(_AUTOCAST_DTYPES)}, got {precision!r}")
    if precision == "fp16" and scaler is None:
        raise ValueError("fp16 training needs a GradScaler: unscaled fp16 gradients underflow to zero")
    if max_grad_norm is not None and not max_grad_norm > 0:
        raise ValueError(f"max_grad_norm must be a positive number or None, got {max_grad_norm!r}")
    x, y = batch
    dtype = _AUTOCAST_DTYPES[precision]
    # Autocast on the device the data lives on: torch.autocast("cuda") does nothing to CPU tensors.
    autocast = torch.autocast(x.device.type, dtype=dtype) if dtype is not None else contextlib.nullcontext()
    with autocast:
        loss = loss_fn(model(x), y)
    # Backward runs outside autocast: each op's backward uses the dtype its forward used.
    (scaler.scale(loss) if scaler is not None else loss).backward()

    grad_norm = None
    if max_grad_norm is not None:
        if scaler is not None:
            scaler.unscale_(optimizer)  # clip the true gradients, not gradients times 65536
        grad_norm = float(torch.nn.utils.clip_grad_norm_(list(_optimizer_params(optimizer)), max_grad_norm))

    skipped = False
    if scaler is not None:
        scale = scaler.get_scale()
        scaler.step(optimizer)  # skips optimizer.step() if a gradient is inf/NaN
        scaler.update()  # halves the scale after a skipped step, grows it after a run of good ones
        skipped = scaler.get_scale() < scale
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return {"loss": float(loss.detach()), "grad_norm": grad_norm, "skipped": skipped}
    # END SOLUTION


def checkpointed(blocks: Sequence[torch.nn.Module], x: torch.Tensor, enabled: bool = True) -> torch.Tensor:
    """Run ``x`` through ``blocks`` in order, checkpointing each block when ``enabled``.

    Each block is called as ``torch.utils.checkpoint.checkpoint(block, x, use_reentrant=False)``:
    only its input is saved for backward and its inner activations are recomputed during the
    backward pass. Values and gradients are the same as a plain ``for block in blocks: x = block(x)``
    (the non-reentrant form also gives parameter gradients when ``x`` does not require grad).
    One block run plainly is accepted (as ``checkpoint_sequential`` runs its last segment), more are not.
    """
    # BEGIN SOLUTION
    for block in blocks:
        x = checkpoint(block, x, use_reentrant=False) if enabled else block(x)
    return x
    # END SOLUTION


def train(model: torch.nn.Module, get_batch: Callable[[], Batch], loss_fn: LossFn,
          optimizer: torch.optim.Optimizer, steps: int, precision: str = "fp32",
          scaler: torch.amp.GradScaler | None = None, max_grad_norm: float | None = None) -> list[float]:
    """Run ``steps`` calls of ``train_step`` on ``get_batch()`` batches; return the per-step losses.

    ``steps`` is a count (an int or a whole-number float); the other arguments are passed to
    ``train_step`` unchanged.

    Raises:
        ValueError: a negative or non-whole ``steps``, and what ``train_step`` rejects (at the first
            step; with ``steps = 0``, raising it and returning ``[]`` are both accepted). [P8.train-steps-count]
    """
    # BEGIN SOLUTION
    steps = as_count(steps, "steps")
    return [train_step(model, get_batch(), loss_fn, optimizer, scaler=scaler, precision=precision,
                       max_grad_norm=max_grad_norm)["loss"]
            for _ in range(steps)]
    # END SOLUTION
