"""P1 · dtype memory accounting: how many bytes tensors, parameters and training runs cost.

Every number here is arithmetic on shapes and dtypes: nothing is allocated, so a tensor of
10**12 elements or a 70e9-parameter model is accounted for instantly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ._counts import as_count


def bytes_per_element(dtype: torch.dtype) -> int:
    """Bytes one element of ``dtype`` occupies (what ``Tensor.element_size()`` reports).

    Supported: float64/32/16, bfloat16, every float8 variant (e4m3fn, e5m2, e4m3fnuz, e5m2fnuz,
    and e8m0fnu where the installed torch has it: 2.7+), int8/16/32/64, uint8/16/32/64, bool,
    complex64, complex128.

    Raises:
        ValueError: any other dtype (sub-byte such as ``torch.int4``, quantized such as
            ``torch.qint8``) or something that is not a dtype. [P1.element-size-refuses]
    """
    raise NotImplementedError("memory.bytes_per_element is not implemented yet: see handout.md, section 'memory.bytes_per_element'")


def tensor_memory_bytes(shape: Sequence[int], dtype: torch.dtype) -> int:
    """Bytes of a contiguous tensor of ``shape`` and ``dtype``, computed without allocating it.

    ``shape`` is a sequence of non-negative ints (a ``torch.Size`` works).
    ``tensor_memory_bytes((1024, 1024), torch.float32) == 4 MiB``.

    Raises:
        ValueError: a shape that is not a sequence of non-negative ints, or an unsupported dtype.
            [P1.tensor-bytes-refuses]
    """
    raise NotImplementedError("memory.tensor_memory_bytes is not implemented yet: see handout.md, section 'memory.tensor_memory_bytes'")


def float_layout(dtype: torch.dtype) -> tuple[int, int, int]:
    """``(sign, exponent, mantissa)`` bit counts of a floating-point dtype.

    Supported: float64 (1, 11, 52), float32 (1, 8, 23), float16 (1, 5, 10), bfloat16 (1, 8, 7),
    float8_e4m3fn (1, 4, 3), float8_e5m2 (1, 5, 2).

    Raises:
        ValueError: any other dtype. [P1.float-layout-refuses]
    """
    raise NotImplementedError("memory.float_layout is not implemented yet: see handout.md, section 'memory.float_layout'")


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
    raise NotImplementedError("memory.decode_float is not implemented yet: see handout.md, section 'memory.decode_float'")


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
    raise NotImplementedError("memory.underflows_to_zero is not implemented yet: see handout.md, section 'memory.underflows_to_zero'")


def training_bytes_per_param(optimizer: str, param_dtype: torch.dtype = torch.float32) -> int:
    """Bytes one parameter costs during training (activations not counted).

    The parameter and its gradient in ``param_dtype``, plus the optimizer's state in float32:
    "sgd" keeps 0 state tensors, "momentum", "adagrad" and "rmsprop" 1, "adam" and "adamw" 2.
    float32 AdamW: 4 + 4 + (4 + 4) = 16.

    Raises:
        ValueError: an unknown optimizer name (the names are exact, in lower case: "Adam" is unknown)
            or an unsupported dtype. [P1.training-bytes-refuses]
    """
    raise NotImplementedError("memory.training_bytes_per_param is not implemented yet: see handout.md, section 'memory.training_bytes_per_param'")


def max_trainable_params(num_gpus: int | float, bytes_per_gpu: int | float, bytes_per_param: int | float) -> int:
    """How many parameters fit in the devices' memory: floor(num_gpus * bytes_per_gpu / bytes_per_param).

    Activations are ignored. The lecture's 8 H100s of 80e9 bytes with AdamW (16 bytes/param)
    hold 4e10 parameters. Counts may be whole-number floats; bytes_per_param must be >= 1.

    Raises:
        ValueError: ``bytes_per_param == 0``, or a negative or non-whole count. [P1.max-params-refuses]
    """
    raise NotImplementedError("memory.max_trainable_params is not implemented yet: see handout.md, section 'memory.max_trainable_params'")


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
    raise NotImplementedError("memory.deep_linear_memory is not implemented yet: see handout.md, section 'memory.deep_linear_memory'")
