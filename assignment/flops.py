"""P4: FLOP accounting and model FLOPs utilization (MFU).

A FLOP here is one floating-point add or multiply, so an (m x k) @ (k x n) product costs
2*m*k*n FLOPs (each of the m*n outputs is k multiplies and k adds). Counts (sizes, tokens,
parameters, layers, GPUs, repeats) may be ints or whole-number floats such as 70e9, and FLOP
counts are returned as ints [P4.whole-float-counts]; a count that is negative or not a whole
number raises ValueError [P4.counts].
"""

from __future__ import annotations

import math
import numbers
import time

import torch

from ._counts import as_count

SECONDS_PER_DAY = 86_400


def matmul_flops(m: int | float, k: int | float, n: int | float) -> int:
    """FLOPs of an (m x k) @ (k x n) product: 2*m*k*n (one multiply and one add per term)."""
    raise NotImplementedError("flops.matmul_flops is not implemented yet: see handout.md, section 'flops.matmul_flops'")


def forward_flops(num_tokens: int | float, num_params: int | float) -> int:
    """Forward-pass FLOPs of a matmul-dominated model: 2 * tokens * parameters."""
    raise NotImplementedError("flops.forward_flops is not implemented yet: see handout.md, section 'flops.forward_flops'")


def backward_flops(num_tokens: int | float, num_params: int | float) -> int:
    """Backward-pass FLOPs: 4 * tokens * parameters (gradients w.r.t. inputs and w.r.t. weights)."""
    raise NotImplementedError("flops.backward_flops is not implemented yet: see handout.md, section 'flops.backward_flops'")


def training_flops(num_tokens: int | float, num_params: int | float) -> int:
    """FLOPs of training (forward + backward): 6 * tokens * parameters."""
    raise NotImplementedError("flops.training_flops is not implemented yet: see handout.md, section 'flops.training_flops'")


def deep_linear_flops(batch: int | float, dim: int | float, num_layers: int | float) -> dict[str, int]:
    """Exact matmul FLOPs of one training step of the deep linear model.

    The model: ``num_layers`` bias-free dim x dim linear layers, then a bias-free dim x 1
    head, on a (batch x dim) input that does not require grad. Returns
    ``{"forward": ..., "backward": ...}`` as ``torch.utils.flop_counter.FlopCounterMode``
    counts them: forward 2*batch*P (P parameters); backward computes every weight gradient
    (2*batch*P) and every input gradient except the first layer's (nobody needs dL/dx), so
    4*batch*P - 2*batch*(parameters of the first layer). With ``num_layers == 0`` the head is
    the first layer.
    """
    raise NotImplementedError("flops.deep_linear_flops is not implemented yet: see handout.md, section 'flops.deep_linear_flops'")


def mfu(flops: float, seconds: float, peak_flops_per_second: float) -> float:
    """Model FLOPs utilization: achieved FLOP/s over the hardware's promised peak FLOP/s.

    ``flops / seconds / peak_flops_per_second``. The result is not clipped: a value above 1
    means a wrong peak or a broken timing.

    Raises:
        ValueError: ``flops`` negative or not finite, or ``seconds`` or ``peak_flops_per_second``
            not a finite number > 0. [P4.mfu-refuses]
    """
    raise NotImplementedError("flops.mfu is not implemented yet: see handout.md, section 'flops.mfu'")


def training_days(num_params: int | float, num_tokens: int | float, num_gpus: int | float, peak_flops_per_gpu: float,
                  mfu: float) -> float:
    """Days to train: 6 * params * tokens / (num_gpus * peak_flops_per_gpu * mfu), in days.

    Raises:
        ValueError: ``mfu`` outside (0, 1], ``num_gpus`` below 1 or not whole,
            ``peak_flops_per_gpu`` not a finite number > 0, or a negative or non-whole count.
            [P4.training-days-refuses]
    """
    raise NotImplementedError("flops.training_days is not implemented yet: see handout.md, section 'flops.training_days'")


def time_matmul(m: int | float, k: int | float, n: int | float, dtype: torch.dtype, device: str | torch.device,
                repeats: int | float = 10) -> float:
    """Mean wall-clock seconds of one (m x k) @ (k x n) product in ``dtype`` on ``device``.

    Measured properly: the inputs drawn once [P4.time-matmul-inputs], a few warm-up products
    first (the first call pays for library initialization and kernel selection), then ``repeats``
    products of those inputs timed together, and on
    CUDA ``torch.cuda.synchronize`` before starting and before stopping the clock (kernels run
    asynchronously: without it you time the launches, not the work) [P4.time-matmul-sync].
    ``dtype`` is float16, bfloat16, float32 or float64; ``repeats`` >= 1.

    Raises:
        ValueError: a ``dtype`` other than float16, bfloat16, float32 and float64, ``repeats`` below
            1, or a negative or non-whole count. [P4.time-matmul-refuses]
    """
    raise NotImplementedError("flops.time_matmul is not implemented yet: see handout.md, section 'flops.time_matmul'")


def matmul_mfu(m: int | float, k: int | float, n: int | float, dtype: torch.dtype, device: str | torch.device,
               peak_flops_per_second: float) -> float:
    """Measured MFU of an (m x k) @ (k x n) product: its FLOPs over ``time_matmul`` (default repeats), over the peak."""
    raise NotImplementedError("flops.matmul_mfu is not implemented yet: see handout.md, section 'flops.matmul_mfu'")
