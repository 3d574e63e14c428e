"""Public tests for P1 (memory.py): dtype sizes, float bit layouts, training memory."""

from __future__ import annotations

import inspect
import math
import time
from pathlib import Path

import pytest
import torch
from _kit import call, check_equal, check_raises, check_true
from _layout_reader import reinterpretations
from hypothesis import given, settings
from hypothesis import strategies as st

E8M0 = [torch.float8_e8m0fnu] if hasattr(torch, "float8_e8m0fnu") else []  # PyTorch 2.7+
SIZED_DTYPES = [
    torch.float64, torch.float32, torch.float16, torch.bfloat16,
    torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz,
    torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.uint64,
    torch.bool, torch.complex64, torch.complex128, *E8M0,
]
UNSUPPORTED_DTYPES = [getattr(torch, name) for name in ("qint8", "quint8", "quint4x2", "int4", "uint1", "float4_e2m1fn_x2")
                      if hasattr(torch, name)]
FLOAT8 = [torch.float8_e4m3fn, torch.float8_e5m2]
UNDERFLOW_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
                    torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]


def torch_decode(bits: int, dtype: torch.dtype) -> float:
    """What PyTorch reads in the bit pattern (the oracle)."""
    unsigned = {1: torch.uint8, 2: torch.uint16, 4: torch.uint32}[dtype.itemsize]
    return torch.tensor([bits], dtype=torch.int64).to(unsigned).view(dtype).float().item()


def same_float(got: object, want: float) -> bool:
    if not isinstance(got, float):
        return False
    if math.isnan(want):
        return math.isnan(got)
    return got == want and math.copysign(1.0, got) == math.copysign(1.0, want)


@pytest.mark.rule("P1.element-size")
@pytest.mark.parametrize("dtype", SIZED_DTYPES, ids=str)
def test_bytes_per_element_matches_torch(memory, dtype):
    check_equal(memory.bytes_per_element, dtype, expected=torch.empty((), dtype=dtype).element_size())


@pytest.mark.rule("P1.element-size-refuses")
@pytest.mark.parametrize("dtype", UNSUPPORTED_DTYPES, ids=str)
def test_bytes_per_element_rejects_sub_byte_and_quantized(memory, dtype):
    check_raises(ValueError, memory.bytes_per_element, dtype)


@pytest.mark.rule("P1.element-size-refuses")
@pytest.mark.parametrize("not_a_dtype", ["float32", None, 4, float], ids=repr)
def test_bytes_per_element_rejects_what_is_not_a_dtype(memory, not_a_dtype):
    check_raises(ValueError, memory.bytes_per_element, not_a_dtype,
                 why="something that is not a torch.dtype raises ValueError, as the rule says (not TypeError)")


@pytest.mark.rule("P1.tensor-bytes")
def test_tensor_memory_bytes_lecture_examples(memory):
    check_equal(memory.tensor_memory_bytes, (4, 8), torch.float32, expected=128)
    # The lecture's GPT-3 feed-forward matrix: 2304 MiB in float32, half that in bfloat16.
    check_equal(memory.tensor_memory_bytes, (12288 * 4, 12288), torch.float32, expected=2304 * 2**20)
    check_equal(memory.tensor_memory_bytes, (12288 * 4, 12288), torch.bfloat16, expected=1152 * 2**20)
    check_equal(memory.tensor_memory_bytes, (), torch.float64, expected=8, why="() is a scalar: one element")
    check_equal(memory.tensor_memory_bytes, (3, 0, 5), torch.int64, expected=0)
    check_equal(memory.tensor_memory_bytes, [4, 8], torch.float32, expected=128, why="any sequence of ints: a list too")
    check_equal(memory.tensor_memory_bytes, torch.Size([4, 8]), torch.float16, expected=64,
                why="any sequence of ints: a torch.Size too")


@pytest.mark.rule("P1.tensor-bytes-no-alloc")
def test_tensor_memory_bytes_never_allocates(memory):
    start = time.perf_counter()
    check_equal(memory.tensor_memory_bytes, (10**6, 10**6), torch.float32, expected=4 * 10**12)
    elapsed = time.perf_counter() - start
    check_true(elapsed < 1.0, "memory.tensor_memory_bytes((10**6, 10**6), torch.float32)", f"{elapsed:.2f} s",
               "an instant answer", "memory.tensor_memory_bytes",
               "compute the product of the shape; never build the tensor")


@pytest.mark.rule("P1.tensor-bytes")
@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(0, 6), max_size=4), dtype=st.sampled_from(SIZED_DTYPES))
def test_tensor_memory_bytes_matches_real_tensors(memory, shape, dtype):
    tensor = torch.empty(shape, dtype=dtype)
    check_equal(memory.tensor_memory_bytes, tuple(shape), dtype, expected=tensor.numel() * tensor.element_size())


@pytest.mark.rule("P1.tensor-bytes-refuses", "ALL.errors")
def test_tensor_memory_bytes_rejects_negative_sizes_and_other_dtypes(memory):
    check_raises(ValueError, memory.tensor_memory_bytes, (2, -1), torch.float32)
    check_raises(ValueError, memory.tensor_memory_bytes, (-2, -3), torch.float32,
                 why="every size must be non-negative: two negative sizes multiply to a positive 6")
    check_raises(ValueError, memory.tensor_memory_bytes, (0, -1), torch.float32,
                 why="every size must be non-negative: a 0 beside it makes the product 0, not the size valid")
    check_raises(ValueError, memory.tensor_memory_bytes, (2, 3), torch.qint8)
    check_raises(ValueError, memory.tensor_memory_bytes, (0, 3), torch.qint8,
                 why="an unsupported dtype is refused whatever the shape, one with no elements too")


@pytest.mark.rule("P1.float-layout")
@pytest.mark.parametrize("dtype, layout", [
    (torch.float64, (1, 11, 52)), (torch.float32, (1, 8, 23)), (torch.float16, (1, 5, 10)),
    (torch.bfloat16, (1, 8, 7)), (torch.float8_e4m3fn, (1, 4, 3)), (torch.float8_e5m2, (1, 5, 2)),
], ids=str)
def test_float_layout(memory, dtype, layout):
    got = check_equal(memory.float_layout, dtype, expected=layout)
    check_true(sum(got) == 8 * dtype.itemsize, f"memory.float_layout({dtype})", got,
               f"bit counts that add up to {8 * dtype.itemsize}", "memory.float_layout")


@pytest.mark.rule("P1.float-layout-refuses")
def test_float_layout_rejects_other_dtypes(memory):
    check_raises(ValueError, memory.float_layout, torch.int32)
    check_raises(ValueError, memory.float_layout, torch.float8_e4m3fnuz, why="float_layout knows six formats only")


def pattern_id(value: object) -> str:
    return hex(value) if isinstance(value, int) else str(value)


@pytest.mark.rule("P1.decode-float")
@pytest.mark.parametrize("bits, dtype, value", [
    (0x3C00, torch.float16, 1.0), (0xC000, torch.float16, -2.0), (0x7BFF, torch.float16, 65504.0),
    (0x0400, torch.float16, 2.0**-14), (0x7C00, torch.float16, math.inf), (0xFC00, torch.float16, -math.inf),
    (0x7E00, torch.float16, math.nan), (0xFC01, torch.float16, math.nan), (0x3F80, torch.bfloat16, 1.0),
    (0x7F80, torch.bfloat16, math.inf), (0x3F800000, torch.float32, 1.0), (0x7E, torch.float8_e4m3fn, 448.0),
    (0x7B, torch.float8_e5m2, 57344.0), (0x7C, torch.float8_e5m2, math.inf), (0x7D, torch.float8_e5m2, math.nan),
    (0xFC, torch.float8_e5m2, -math.inf), (0x7F800000, torch.float32, math.inf), (0xFFC00000, torch.float32, math.nan),
    (0xC1200000, torch.float32, -10.0),
], ids=pattern_id)
def test_decode_float_examples(memory, bits, dtype, value):
    check_equal(memory.decode_float, bits, dtype, expected=value)


@pytest.mark.rule("P1.subnormals")
@pytest.mark.parametrize("bits, dtype, value", [
    (0x0001, torch.float16, 2.0**-24), (0x03FF, torch.float16, 1023 * 2.0**-24), (0x0001, torch.bfloat16, 2.0**-133),
    (0x00000001, torch.float32, 2.0**-149), (0x01, torch.float8_e4m3fn, 2.0**-9), (0x83, torch.float8_e5m2, -3 * 2.0**-16),
], ids=pattern_id)
def test_decode_float_subnormals(memory, bits, dtype, value):
    check_equal(memory.decode_float, bits, dtype, expected=value,
                why="an exponent field of 0 is a subnormal: m/2^M · 2^(1 - bias), no implicit leading 1")


@pytest.mark.rule("P1.signed-zero")
@pytest.mark.parametrize("bits, dtype", [(0x8000, torch.float16), (0x8000, torch.bfloat16), (0x80000000, torch.float32),
                                         (0x80, torch.float8_e4m3fn), (0x80, torch.float8_e5m2)], ids=pattern_id)
def test_decode_float_keeps_the_sign_of_zero(memory, bits, dtype):
    check_equal(memory.decode_float, bits, dtype, expected=-0.0,
                why="only the sign bit is set: -0.0 (math.copysign(0.0, -1.0)), not 0.0")
    got = call(memory.decode_float, 0, dtype)
    check_true(same_float(got, 0.0), f"memory.decode_float(0x0, {dtype})", got, "0.0 (a positive zero)",
               "memory.decode_float")


@pytest.mark.rule("P1.e4m3fn-nan")
@pytest.mark.parametrize("bits, value", [(0x78, 256.0), (0x7E, 448.0), (0xF8, -256.0), (0x7F, math.nan),
                                         (0xFF, math.nan)], ids=pattern_id)
def test_decode_float_e4m3fn_has_no_infinities(memory, bits, value):
    check_equal(memory.decode_float, bits, torch.float8_e4m3fn, expected=value,
                why="float8_e4m3fn has no infinities: its all-ones exponent holds numbers, and only S.1111.111 is NaN")


@pytest.mark.rule("P1.decode-float")
@pytest.mark.parametrize("dtype", FLOAT8, ids=str)
def test_decode_float_every_float8_pattern(memory, dtype):
    for bits in range(256):
        want = torch_decode(bits, dtype)
        got = call(memory.decode_float, bits, dtype)
        check_true(same_float(got, want), f"memory.decode_float({bits:#04x}, {dtype})", got,
                   f"{want!r} (what PyTorch reads in these bits)", "memory.decode_float")


@pytest.mark.rule("P1.decode-float")
@settings(max_examples=30, deadline=None)
@given(bits=st.integers(0, 2**16 - 1), dtype=st.sampled_from([torch.float16, torch.bfloat16]))
def test_decode_float_16_bit_patterns(memory, bits, dtype):
    want = torch_decode(bits, dtype)
    got = call(memory.decode_float, bits, dtype)
    check_true(same_float(got, want), f"memory.decode_float({bits:#06x}, {dtype})", got,
               f"{want!r} (what PyTorch reads in these bits)", "memory.decode_float")


@pytest.mark.rule("P1.decode-refuses")
def test_decode_float_rejects_patterns_out_of_range_and_other_dtypes(memory):
    check_raises(ValueError, memory.decode_float, 2**16, torch.float16)
    check_raises(ValueError, memory.decode_float, 256, torch.float8_e4m3fn)
    check_raises(ValueError, memory.decode_float, -1, torch.float8_e5m2)
    check_raises(ValueError, memory.decode_float, 0, torch.float64, why="decode_float reads five formats, not float64")


@pytest.mark.rule("P1.decode-from-layout")
def test_decode_float_is_bit_arithmetic(memory):
    check_equal(memory.decode_float, 0x3C00, torch.float16, expected=1.0)  # the form counts beside working code
    found = reinterpretations(Path(inspect.getsourcefile(memory)).parent)
    check_true(not found, "the source of memory.decode_float and the helpers it uses", ", ".join(found[:5]),
               "shifts, masks and math.ldexp: nothing reinterpreted with .view, frombuffer, struct, ctypes, "
               "memoryview, astype or numpy's float types", "memory.decode_float")


@pytest.mark.rule("P1.underflow")
def test_underflows_to_zero_lecture_example(memory):
    check_equal(memory.underflows_to_zero, 1e-8, torch.float16, expected=True)
    check_equal(memory.underflows_to_zero, 1e-8, torch.bfloat16, expected=False)
    check_equal(memory.underflows_to_zero, 1e-8, torch.float32, expected=False)
    check_equal(memory.underflows_to_zero, -1e-8, torch.float16, expected=True, why="the sign does not matter")
    check_equal(memory.underflows_to_zero, 3, torch.float8_e4m3fn, expected=False, why="an int is a value too")


@pytest.mark.rule("P1.underflow")
def test_underflows_to_zero_never_in_float64(memory):
    for value in (1e-300, 5e-324, -5e-324):
        check_equal(memory.underflows_to_zero, value, torch.float64, expected=False,
                    why="a nonzero float64 is already a float64: it never underflows in float64")


@pytest.mark.rule("P1.underflow-float32-first")
@pytest.mark.parametrize("dtype, half", [(torch.float16, 2.0**-25), (torch.bfloat16, 2.0**-134)], ids=str)
def test_underflows_to_zero_rounds_to_float32_first(memory, dtype, half):
    value = half * (1 + 2**-40)  # above half the smallest subnormal, but float32 rounds it onto that half
    check_equal(memory.underflows_to_zero, value, dtype, expected=True,
                why=f"PyTorch rounds the float64 {value!r} to float32 first ({half!r}, exactly half of {dtype}'s "
                    "smallest subnormal), then to the target: compare the float32-rounded value")


@pytest.mark.rule("P1.underflow-ties")
def test_underflows_to_zero_handout_boundary_example(memory):
    check_equal(memory.underflows_to_zero, 2**-25, torch.float16, expected=True,
                why="exactly half the smallest subnormal (2^-24) rounds to zero: 'at most half', <= not <")
    check_equal(memory.underflows_to_zero, 0.75 * 2**-24, torch.float16, expected=False,
                why="three quarters of the smallest subnormal rounds up to it")


BIASES = {torch.float32: (127, 23), torch.float16: (15, 10), torch.bfloat16: (127, 7), torch.float8_e4m3fn: (7, 3),
          torch.float8_e5m2: (15, 2), torch.float8_e4m3fnuz: (8, 3), torch.float8_e5m2fnuz: (16, 2)}


def smallest_subnormal(dtype: torch.dtype) -> tuple[float, str]:
    """The smallest positive subnormal of ``dtype``, and where it comes from (for messages)."""
    bias, mantissa_bits = BIASES[dtype]
    rule = f"{dtype}'s smallest subnormal is 2^(1 - bias - M) = 2^{1 - bias - mantissa_bits} (bias {bias}"
    return 2.0 ** (1 - bias - mantissa_bits), rule + (", one more than the IEEE rule)" if "fnuz" in str(dtype) else ")")


@pytest.mark.rule("P1.underflow-ties")
@pytest.mark.parametrize("dtype", [d for d in BIASES if "fnuz" not in str(d)], ids=str)
def test_underflows_to_zero_at_half_the_smallest_subnormal(memory, dtype):
    smallest, rule = smallest_subnormal(dtype)
    check_equal(memory.underflows_to_zero, smallest / 2, dtype, expected=True,
                why=f"{rule}; exactly half of it rounds to zero (<=, not <)")
    check_equal(memory.underflows_to_zero, 0.75 * smallest, dtype, expected=False,
                why=f"{rule}; three quarters of it rounds up to it")


@pytest.mark.rule("P1.fnuz-bias")
@pytest.mark.parametrize("dtype", [d for d in BIASES if "fnuz" in str(d)], ids=str)
def test_underflows_to_zero_fnuz_bias(memory, dtype):
    smallest, rule = smallest_subnormal(dtype)
    check_equal(memory.underflows_to_zero, 0.75 * smallest, dtype, expected=False,
                why=f"{rule}; three quarters of it rounds up to it")
    check_equal(memory.underflows_to_zero, 0.25 * smallest, dtype, expected=True,
                why=f"{rule}; a quarter of it rounds to zero")


@pytest.mark.rule("P1.underflow")
@settings(max_examples=30, deadline=None)
@given(mantissa=st.floats(0.5, 1.0, exclude_max=True), exponent=st.integers(-160, 4), negative=st.booleans(),
       dtype=st.sampled_from(UNDERFLOW_DTYPES))
def test_underflows_to_zero_matches_torch(memory, mantissa, exponent, negative, dtype):
    value = math.ldexp(-mantissa if negative else mantissa, exponent)
    want = bool(torch.tensor(value, dtype=torch.float64).to(dtype) == 0)
    check_equal(memory.underflows_to_zero, value, dtype, expected=want)


@pytest.mark.rule("P1.underflow-refuses")
def test_underflows_to_zero_rejects_bad_arguments(memory):
    check_raises(ValueError, memory.underflows_to_zero, 0.0, torch.float16)
    check_raises(ValueError, memory.underflows_to_zero, -0.0, torch.float16)
    check_raises(ValueError, memory.underflows_to_zero, math.inf, torch.float16)
    check_raises(ValueError, memory.underflows_to_zero, math.nan, torch.bfloat16)
    check_raises(ValueError, memory.underflows_to_zero, 1e-8, torch.int32)
    for dtype in E8M0:
        check_raises(ValueError, memory.underflows_to_zero, 1e-8, dtype, why="float8_e8m0fnu has no zero")


@pytest.mark.rule("P1.training-bytes")
@pytest.mark.parametrize("optimizer, dtype, expected", [
    ("adamw", torch.float32, 16), ("adam", torch.float32, 16), ("sgd", torch.float32, 8),
    ("momentum", torch.float32, 12), ("adagrad", torch.float32, 12), ("rmsprop", torch.float32, 12),
    ("adam", torch.bfloat16, 12), ("sgd", torch.bfloat16, 4), ("momentum", torch.float16, 8), ("adamw", torch.float64, 24),
])
def test_training_bytes_per_param(memory, optimizer, dtype, expected):
    check_equal(memory.training_bytes_per_param, optimizer, dtype, expected=expected)


@pytest.mark.rule("P1.training-bytes")
def test_training_bytes_per_param_defaults_to_float32(memory):
    check_equal(memory.training_bytes_per_param, "adamw", expected=16, why="param_dtype defaults to torch.float32")


@pytest.mark.rule("P1.training-bytes-refuses")
def test_training_bytes_per_param_rejects_unknown_optimizers_and_dtypes(memory):
    check_raises(ValueError, memory.training_bytes_per_param, "lion")
    check_raises(ValueError, memory.training_bytes_per_param, "Adam", why="names are lower case, as listed")
    check_raises(ValueError, memory.training_bytes_per_param, "adam", torch.qint8)


@pytest.mark.rule("P1.max-params")
def test_max_trainable_params_lecture_example(memory):
    check_equal(memory.max_trainable_params, 8, 80e9, 16, expected=40_000_000_000,
                why="8 H100s x 80e9 bytes / 16 bytes per AdamW parameter")
    check_equal(memory.max_trainable_params, 3, 10, 7, expected=4, why="the floor of 30 / 7, as an int")
    check_equal(memory.max_trainable_params, 4.0, 24e9, 12.0, expected=8_000_000_000,
                why="counts may be whole-number floats")
    check_equal(memory.max_trainable_params, 0, 80e9, 16, expected=0,
                why="0 GPUs is a count (only bytes_per_param == 0 is refused): no memory, no parameter")
    check_equal(memory.max_trainable_params, 8, 0, 16, expected=0,
                why="0 bytes per GPU is a count (only bytes_per_param == 0 is refused): no memory, no parameter")


@pytest.mark.rule("P1.max-params")
def test_max_trainable_params_divides_on_ints(memory):
    check_equal(memory.max_trainable_params, 3, 10**17 + 1, 7, expected=(3 * (10**17 + 1)) // 7,
                why="do the division on ints (//): a float keeps 53 bits and int(a * b / c) loses the last digits")


@pytest.mark.rule("P1.max-params-refuses", "ALL.counts")
def test_max_trainable_params_refuses_bad_counts(memory):
    check_raises(ValueError, memory.max_trainable_params, 8, 80e9, 0, why="bytes_per_param == 0 is refused")
    check_raises(ValueError, memory.max_trainable_params, -1, 80e9, 16, why="a negative count is refused")
    check_raises(ValueError, memory.max_trainable_params, 8, 80.5, 16, why="a count that is not a whole number is refused")
    check_raises(ValueError, memory.max_trainable_params, 8, 80e9, 2.5, why="a count that is not a whole number is refused")


@pytest.mark.rule("P1.deep-linear")
def test_deep_linear_memory_lecture_example(memory):
    # The lecture: B=2, D=4, two layers, AdaGrad, float32: 36 parameters, 16 activations.
    check_equal(memory.deep_linear_memory, 2, 4, 2, expected={
        "parameters": 144, "activations": 64, "gradients": 144, "optimizer_state": 144, "total": 496})


@pytest.mark.rule("P1.deep-linear-state-float32")
def test_deep_linear_memory_keeps_optimizer_state_in_float32(memory):
    # B=2, D=4, two layers, AdaGrad, bfloat16: 36 parameters and 16 activations of 2 bytes, 36 states of 4.
    check_equal(memory.deep_linear_memory, 2, 4, 2, "adagrad", torch.bfloat16, expected={
        "parameters": 72, "activations": 32, "gradients": 72, "optimizer_state": 144, "total": 320},
        why="optimizer state stays float32 (4 bytes a state) even when dtype is bfloat16")


@pytest.mark.rule("P1.deep-linear-head")
def test_deep_linear_memory_head_has_parameters_but_no_activation(memory):
    # No hidden layer: only the dim x 1 head, whose output is not an activation.
    check_equal(memory.deep_linear_memory, 3, 5, 0, "sgd", expected={
        "parameters": 20, "activations": 0, "gradients": 20, "optimizer_state": 0, "total": 40},
        why="the head has dim parameters (5 here) but its output is not counted as an activation")


@pytest.mark.rule("P1.deep-linear-refuses")
def test_deep_linear_memory_refuses_bad_arguments(memory):
    check_raises(ValueError, memory.deep_linear_memory, -1, 4, 2, why="a negative count is refused")
    check_raises(ValueError, memory.deep_linear_memory, 2, 4.5, 2, why="a count that is not a whole number is refused")
    check_raises(ValueError, memory.deep_linear_memory, 2, 4, -2, why="num_layers is a count too: a negative one is refused")
    check_raises(ValueError, memory.deep_linear_memory, 2, 4, 1.5,
                 why="num_layers is a count too: one that is not a whole number is refused")
    check_raises(ValueError, memory.deep_linear_memory, 2, 4, 2, "lion")
    check_raises(ValueError, memory.deep_linear_memory, 2, 4, 2, "adam", torch.qint8)


@pytest.mark.rule("P1.deep-linear")
def test_deep_linear_memory_parameters_match_a_real_model(memory):
    batch, dim, num_layers = 3, 8, 4
    layers = [torch.nn.Linear(dim, dim, bias=False) for _ in range(num_layers)] + [torch.nn.Linear(dim, 1, bias=False)]
    param_bytes = sum(p.numel() * p.element_size() for layer in layers for p in layer.parameters())
    got = call(memory.deep_linear_memory, batch, dim, num_layers, "adam")
    check_true(isinstance(got, dict) and got.get("parameters") == param_bytes,
               f"memory.deep_linear_memory({batch}, {dim}, {num_layers}, 'adam')", got,
               f"'parameters' == {param_bytes} (counted on a real stack of nn.Linear)", "memory.deep_linear_memory")
