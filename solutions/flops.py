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

# BEGIN SOLUTION
_TIMED_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
_WARMUP = 3


def _real(value: float, name: str, *, positive: bool) -> float:
    """``value`` as a float; ValueError unless it is a finite number, > 0 if ``positive`` else >= 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) \
            or value < 0 or (positive and value == 0):
        raise ValueError(f"{name} must be a finite number {'>' if positive else '>='} 0, got {value!r}")
    return float(value)


def _synchronize(device: torch.device) -> None:
    """Wait for queued kernels: CUDA runs asynchronously, so a timer must not stop before the GPU does."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# END SOLUTION


def matmul_flops(m: int | float, k: int | float, n: int | float) -> int:
    """FLOPs of an (m x k) @ (k x n) product: 2*m*k*n (one multiply and one add per term)."""
    # BEGIN SOLUTION
    return 2 * as_count(m, "m") * as_count(k, "k") * as_count(n, "n")
    # END SOLUTION


def forward_flops(num_tokens: int | float, num_params: int | float) -> int:
    """Forward-pass FLOPs of a matmul-dominated model: 2 * tokens * parameters."""
    # BEGIN SOLUTION
    return 2 * as_count(num_tokens, "num_tokens") * as_count(num_params, "num_params")
    # END SOLUTION


def backward_flops(num_tokens: int | float, num_params: int | float) -> int:
    """Backward-pass FLOPs: 4 * tokens * parameters (gradients w.r.t. inputs and w.r.t. weights)."""
    # BEGIN SOLUTION
    return 4 * as_count(num_tokens, "num_tokens") * as_count(num_params, "num_params")
    # END SOLUTION


def training_flops(num_tokens: int | float, num_params: int | float) -> int:
    """FLOPs of training (forward + backward): 6 * tokens * parameters."""
    # BEGIN SOLUTION
    return 6 * as_count(num_tokens, "num_tokens") * as_count(num_params, "num_params")
    # END SOLUTION


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
    # BEGIN SOLUTION
    batch, dim, num_layers = as_count(batch, "batch"), as_count(dim, "dim"), as_count(num_layers, "num_layers")
    num_params = num_layers * dim * dim + dim
    first_layer_params = dim * dim if num_layers else dim
    return {
        "forward": 2 * batch * num_params,
        "backward": 4 * batch * num_params - 2 * batch * first_layer_params,
    }
    # END SOLUTION


def mfu(flops: float, seconds: float, peak_flops_per_second: float) -> float:
    """Model FLOPs utilization: achieved FLOP/s over the hardware's promised peak FLOP/s.

    ``flops / seconds / peak_flops_per_second``. The result is not clipped: a value above 1
    means a wrong peak or a broken timing.

    Raises:
        ValueError: ``flops`` negative or not finite, or ``seconds`` or ``peak_flops_per_second``
            not a finite number > 0. [P4.mfu-refuses]
    """
    # BEGIN SOLUTION
    return (_real(flops, "flops", positive=False) / _real(seconds, "seconds", positive=True)
            / _real(peak_flops_per_second, "peak_flops_per_second", positive=True))
    # END SOLUTION


def training_days(num_params: int | float, num_tokens: int | float, num_gpus: int | float, peak_flops_per_gpu: float,
                  mfu: float) -> float:
    """Days to train: 6 * params * tokens / (num_gpus * peak_flops_per_gpu * mfu), in days.

    Raises:
        ValueError: ``mfu`` outside (0, 1], ``num_gpus`` below 1 or not whole,
            ``peak_flops_per_gpu`` not a finite number > 0, or a negative or non-whole count.
            [P4.training-days-refuses]
    """
    # BEGIN SOLUTION
    if isinstance(mfu, bool) or not isinstance(mfu, numbers.Real) or not 0 < mfu <= 1:
        raise ValueError(f"mfu must be in (0, 1], got {mfu!r}")
    gpus = as_count(num_gpus, "num_gpus")
    if gpus == 0:
        raise ValueError("num_gpus must be at least 1")
    flop_per_second = gpus * _real(peak_flops_per_gpu, "peak_flops_per_gpu", positive=True) * mfu
    return training_flops(num_tokens, num_params) / flop_per_second / SECONDS_PER_DAY
    # END SOLUTION


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
    # BEGIN SOLUTION
    m, k, n, repeats = as_count(m, "m"), as_count(k, "k"), as_count(n, "n"), as_count(repeats, "repeats")
    if repeats == 0:
        raise ValueError("repeats must be at least 1")
    if dtype not in _TIMED_DTYPES:
        raise ValueError(f"cannot time a matmul in {dtype}; use one of {_TIMED_DTYPES}")
    device = torch.device(device)
    a = torch.randn(m, k, dtype=dtype, device=device)
    b = torch.randn(k, n, dtype=dtype, device=device)
    for _ in range(_WARMUP):
        a @ b
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(repeats):
        a @ b
    _synchronize(device)
    return (time.perf_counter() - start) / repeats
    # END SOLUTION


def matmul_mfu(m: int | float, k: int | float, n: int | float, dtype: torch.dtype, device: str | torch.device,
               peak_flops_per_second: float) -> float:
    """Measured MFU of an (m x k) @ (k x n) product: its FLOPs over ``time_matmul`` (default repeats), over the peak."""
    # BEGIN SOLUTION
    return mfu(matmul_flops(m, k, n), time_matmul(m, k, n, dtype, device), peak_flops_per_second)
    # END SOLUTION
