"""P1 · dtype memory accounting: how many bytes tensors, parameters and training runs cost.

Every number here is arithmetic on shapes and dtypes: nothing is allocated, so a tensor of
10**12 elements or a 70e9-parameter model is accounted for instantly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ._counts import as_count

# BEGIN SOLUTION
_BYTES = {
    torch.float64: 8, torch.float32: 4, torch.float16: 2, torch.bfloat16: 2,
    torch.float8_e4m3fn: 1, torch.float8_e5m2: 1, torch.float8_e4m3fnuz: 1, torch.float8_e5m2fnuz: 1,
    torch.int8: 1, torch.int16: 2, torch.int32: 4, torch.int64: 8,
    torch.uint8: 1, torch.uint16: 2, torch.uint32: 4, torch.uint64: 8,
    torch.bool: 1,
    torch.complex64: 8, torch.complex128: 16,  # two float32 / two float64 (real, imaginary)
}
if hasattr(torch, "float8_e8m0fnu"):  # PyTorch 2.7+
    _BYTES[torch.float8_e8m0fnu] = 1

# (exponent bits, mantissa bits, bias). The sign is always one bit. IEEE-style formats have
# bias 2**(E-1) - 1; the "fnuz" float8 formats (finite, no negative zero) use one more.
_FORMATS = {
    torch.float64: (11, 52, 1023),
    torch.float32: (8, 23, 127),
    torch.float16: (5, 10, 15),
    torch.bfloat16: (8, 7, 127),  # float32's exponent range with only 7 mantissa bits
    torch.float8_e4m3fn: (4, 3, 7),
    torch.float8_e5m2: (5, 2, 15),
    torch.float8_e4m3fnuz: (4, 3, 8),
    torch.float8_e5m2fnuz: (5, 2, 16),
}
_LAYOUT_DTYPES = (torch.float64, torch.float32, torch.float16, torch.bfloat16,
                  torch.float8_e4m3fn, torch.float8_e5m2)
_DECODE_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2)
_UNDERFLOW_DTYPES = tuple(_FORMATS)

# Optimizer state tensors kept per parameter (each one a float32 copy of the parameter's shape).
_STATE_TENSORS = {"sgd": 0, "momentum": 1, "adagrad": 1, "rmsprop": 1, "adam": 2, "adamw": 2}
_STATE_BYTES = 4  # optimizer state is float32


def _format(dtype: object, supported: tuple) -> tuple[int, int, int]:
    if dtype not in supported:
        raise ValueError(f"unsupported dtype {dtype!r}: expected one of {', '.join(map(str, supported))}")
    return _FORMATS[dtype]


def _state_tensors(optimizer: object) -> int:
    if optimizer not in _STATE_TENSORS:
        raise ValueError(f"unknown optimizer {optimizer!r}: expected one of {', '.join(_STATE_TENSORS)}")
    return _STATE_TENSORS[optimizer]
# END SOLUTION


def bytes_per_element(dtype: torch.dtype) -> int:
    """Bytes one element of ``dtype`` occupies (what ``Tensor.element_size()`` reports).

    Supported: float64/32/16, bfloat16, every float8 variant (e4m3fn, e5m2, e4m3fnuz, e5m2fnuz,
    and e8m0fnu where the installed torch has it: 2.7+), int8/16/32/64, uint8/16/32/64, bool,
    complex64, complex128.

    Raises:
        ValueError: any other dtype (sub-byte such as ``torch.int4``, quantized such as
            ``torch.qint8``) or something that is not a dtype. [P1.element-size-refuses]
    """
    # BEGIN SOLUTION
    if not isinstance(dtype, torch.dtype) or dtype not in _BYTES:
        raise ValueError(f"unsupported dtype {dtype!r}")
    return _BYTES[dtype]
    # END SOLUTION


def tensor_memory_bytes(shape: Sequence[int], dtype: torch.dtype) -> int:
    """Bytes of a contiguous tensor of ``shape`` and ``dtype``, computed without allocating it.

    ``shape`` is a sequence of non-negative ints (a ``torch.Size`` works).
    ``tensor_memory_bytes((1024, 1024), torch.float32) == 4 MiB``.

    Raises:
        ValueError: a shape that is not a sequence of non-negative ints, or an unsupported dtype.
            [P1.tensor-bytes-refuses]
    """
    # BEGIN SOLUTION
    if not isinstance(shape, Sequence) or isinstance(shape, (str, bytes)):
        raise ValueError(f"shape must be a sequence of ints, got {shape!r}")
    for size in shape:
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(f"shape entries must be non-negative ints, got {shape!r}")
    return math.prod(shape) * bytes_per_element(dtype)
    # END SOLUTION


def float_layout(dtype: torch.dtype) -> tuple[int, int, int]:
    """``(sign, exponent, mantissa)`` bit counts of a floating-point dtype.

    Supported: float64 (1, 11, 52), float32 (1, 8, 23), float16 (1, 5, 10), bfloat16 (1, 8, 7),
    float8_e4m3fn (1, 4, 3), float8_e5m2 (1, 5, 2).

    Raises:
        ValueError: any other dtype. [P1.float-layout-refuses]
    """
    # BEGIN SOLUTION
    exponent, mantissa, _ = _format(dtype, _LAYOUT_DTYPES)
    return 1, exponent, mantissa
    # END SOLUTION


def decode_float(bits: int, dtype: torch.dtype) -> float:
    """The value the raw bit pattern ``bits`` means in ``dtype``, decoded from the layout.

    ``bits`` is an int with ``0 <= bits < 2**(8 * bytes_per_element(dtype))``, laid out as
    sign | exponent | mantissa (most significant first). Dtypes: float32, float16, bfloat16,
    float8_e4m3fn, float8_e5m2. Normals, subnormals, signed zeros, infinities and NaN come out
    exactly as PyTorch reads the same bits [P1.decode-float]; float8_e4m3fn has no infinities and
    only S.1111.111 is NaN [P1.e4m3fn-nan]. Bit arithmetic only: no reinterpreting through torch,
    numpy or struct [P1.decode-from-layout].

    Raises:
        ValueError: ``bits`` not an int in ``[0, 2**(8 * bytes_per_element(dtype)))``, or another
            dtype. [P1.decode-refuses]
    """
    # BEGIN SOLUTION
    exponent_bits, mantissa_bits, bias = _format(dtype, _DECODE_DTYPES)
    total_bits = 1 + exponent_bits + mantissa_bits
    if isinstance(bits, bool) or not isinstance(bits, int) or not 0 <= bits < 1 << total_bits:
        raise ValueError(f"bits must be an int in [0, 2**{total_bits}) for {dtype}, got {bits!r}")
    sign = -1.0 if bits >> (total_bits - 1) else 1.0
    exponent = (bits >> mantissa_bits) & ((1 << exponent_bits) - 1)
    mantissa = bits & ((1 << mantissa_bits) - 1)
    all_ones = (1 << exponent_bits) - 1
    if dtype == torch.float8_e4m3fn:
        # No infinities: the top exponent holds ordinary numbers, except S.1111.111, the NaN.
        if exponent == all_ones and mantissa == (1 << mantissa_bits) - 1:
            return math.nan
    elif exponent == all_ones:
        return sign * math.inf if mantissa == 0 else math.nan
    if exponent == 0:
        # Subnormal (and zero): no implicit leading 1, exponent fixed at 1 - bias.
        magnitude = math.ldexp(mantissa, 1 - bias - mantissa_bits)
    else:
        # Normal: 1.mantissa * 2**(exponent - bias), with the implicit leading 1 made explicit.
        magnitude = math.ldexp((1 << mantissa_bits) | mantissa, exponent - bias - mantissa_bits)
    return math.copysign(magnitude, sign)  # copysign keeps the sign of a zero: 0x8000 is -0.0
    # END SOLUTION


def underflows_to_zero(value: float, dtype: torch.dtype) -> bool:
    """Whether the nonzero finite ``value`` becomes zero when stored in ``dtype``.

    Exactly ``torch.tensor(value, dtype=torch.float64).to(dtype) == 0``: PyTorch rounds a float64
    to float32 first, then to the target (round to nearest, ties to even), so ``value`` vanishes
    when its float32 rounding is at most half the smallest subnormal of ``dtype``.
    ``underflows_to_zero(1e-8, torch.float16)`` is True; in bfloat16 it is False.
    Dtypes: float64, float32, float16, bfloat16, float8_e4m3fn, float8_e5m2, float8_e4m3fnuz,
    float8_e5m2fnuz.

    Raises:
        ValueError: another dtype (``float8_e8m0fnu`` has no zero), or a zero, infinite or NaN
            value. [P1.underflow-refuses] A value that is not an int or a float is a wrong type, not
            graded: the reference refuses it (a bool too); answering a bool as its number is accepted.
    """
    # BEGIN SOLUTION
    _, mantissa_bits, bias = _format(dtype, _UNDERFLOW_DTYPES)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"value must be a number, got {value!r}")
    value = float(value)
    if value == 0 or not math.isfinite(value):
        raise ValueError(f"value must be nonzero and finite, got {value!r}")
    if dtype == torch.float64:
        return False  # a nonzero float64 is already representable
    half_smallest_subnormal = math.ldexp(1.0, -bias - mantissa_bits)  # 2**(1 - bias - M) / 2
    as_float32 = torch.tensor(value, dtype=torch.float32).item()  # the first rounding, as PyTorch does it
    # Halfway rounds to the even neighbour, and zero is even: ties vanish.
    return abs(as_float32) <= half_smallest_subnormal
    # END SOLUTION


def training_bytes_per_param(optimizer: str, param_dtype: torch.dtype = torch.float32) -> int:
    """Bytes one parameter costs during training (activations not counted).

    The parameter and its gradient in ``param_dtype``, plus the optimizer's state in float32:
    "sgd" keeps 0 state tensors, "momentum", "adagrad" and "rmsprop" 1, "adam" and "adamw" 2.
    float32 AdamW: 4 + 4 + (4 + 4) = 16.

    Raises:
        ValueError: an unknown optimizer name (the names are exact, in lower case: "Adam" is unknown)
            or an unsupported dtype. [P1.training-bytes-refuses]
    """
    # BEGIN SOLUTION
    states = _state_tensors(optimizer)
    return 2 * bytes_per_element(param_dtype) + states * _STATE_BYTES
    # END SOLUTION


def max_trainable_params(num_gpus: int | float, bytes_per_gpu: int | float, bytes_per_param: int | float) -> int:
    """How many parameters fit in the devices' memory: floor(num_gpus * bytes_per_gpu / bytes_per_param).

    Activations are ignored. The lecture's 8 H100s of 80e9 bytes with AdamW (16 bytes/param)
    hold 4e10 parameters. Counts may be whole-number floats; bytes_per_param must be >= 1.

    Raises:
        ValueError: ``bytes_per_param == 0``, or a negative or non-whole count. [P1.max-params-refuses]
    """
    # BEGIN SOLUTION
    gpus = as_count(num_gpus, "num_gpus")
    per_gpu = as_count(bytes_per_gpu, "bytes_per_gpu")
    per_param = as_count(bytes_per_param, "bytes_per_param")
    if per_param == 0:
        raise ValueError("bytes_per_param must be at least 1")
    return gpus * per_gpu // per_param  # exact integer division: no float rounding
    # END SOLUTION


def deep_linear_memory(batch: int | float, dim: int | float, num_layers: int | float, optimizer: str = "adagrad",
                       dtype: torch.dtype = torch.float32) -> dict[str, int]:
    """Training memory of the lecture's deep linear model, in bytes.

    The model: ``num_layers`` bias-free dim x dim linear layers, then a bias-free dim x 1 head.
    Keys: "parameters" (num_layers*dim*dim + dim values), "activations" (the outputs of the
    ``num_layers`` hidden layers, batch x dim each; the head's output is not counted),
    "gradients" (one per parameter), "optimizer_state" (float32, as in
    ``training_bytes_per_param``) and "total" (their sum). Parameters, gradients and
    activations are stored in ``dtype``.

    Raises:
        ValueError: an unknown optimizer name, an unsupported dtype, or a negative or non-whole
            count. [P1.deep-linear-refuses]
    """
    # BEGIN SOLUTION
    batch, dim, num_layers = as_count(batch, "batch"), as_count(dim, "dim"), as_count(num_layers, "num_layers")
    states = _state_tensors(optimizer)
    size = bytes_per_element(dtype)
    num_params = num_layers * dim * dim + dim
    memory = {
        "parameters": num_params * size,
        "activations": num_layers * batch * dim * size,
        "gradients": num_params * size,
        "optimizer_state": states * num_params * _STATE_BYTES,
    }
    memory["total"] = sum(memory.values())
    return memory
    # END SOLUTION
