"""Hidden suite for P1 (memory.py): dtype sizes, float bit patterns, underflow, training memory.

Oracles: ``element_size()``, ``torch.finfo``, PyTorch's own reading of every bit pattern,
``Tensor.to`` for underflow, real ``nn.Linear`` stacks and ``torch.optim`` state for memory.
"""

from __future__ import annotations

import functools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.judge.drivers.answers import same
from grader.judge.hidden._contract import answers, refused_or_as_for, type_tree
from grader.judge.handle import StudentError
from grader.public import public_module

E8M0 = [torch.float8_e8m0fnu] if hasattr(torch, "float8_e8m0fnu") else []  # PyTorch 2.7+
SIZED_DTYPES = [
    torch.float64, torch.float32, torch.float16, torch.bfloat16,
    torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz,
    torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.uint16, torch.uint32, torch.uint64,
    torch.bool, torch.complex64, torch.complex128, *E8M0,
]
# Sub-byte and quantized dtypes (those this torch has).
UNSUPPORTED_DTYPES = [getattr(torch, name) for name in
                      ("qint8", "quint8", "qint32", "quint4x2", "quint2x4", "int1", "int4", "uint1", "uint4",
                       "float4_e2m1fn_x2") if hasattr(torch, name)]
LAYOUT_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
                 torch.float8_e5m2]
UNDERFLOW_DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn,
                    torch.float8_e5m2, torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]
OPTIMIZERS = ["sgd", "momentum", "adagrad", "rmsprop", "adam", "adamw"]
PARAM_DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64]
UNSIGNED = {1: torch.uint8, 2: torch.uint16, 4: torch.uint32}


# --- oracles ------------------------------------------------------------------------------------

def torch_values(dtype: torch.dtype, patterns: list[int]) -> list[float]:
    """What PyTorch reads in each bit pattern (widened exactly to float64)."""
    raw = torch.tensor(patterns, dtype=torch.int64).to(UNSIGNED[dtype.itemsize])
    return raw.view(dtype).double().tolist()


def underflows(value: float, dtype: torch.dtype) -> bool:
    return bool(torch.tensor(value, dtype=torch.float64).to(dtype) == 0)


def smallest_subnormal(dtype: torch.dtype) -> float:
    """The smallest positive value of a format: for every format here, the bit pattern 0x...01."""
    return torch_values(dtype, [1])[0]


@functools.cache
def state_tensors(optimizer: str) -> int:
    """Optimizer state tensors per parameter, counted on a real ``torch.optim`` step."""
    param = torch.nn.Parameter(torch.ones(3, 5))
    param.grad = torch.ones(3, 5)
    builders = {
        "sgd": lambda p: torch.optim.SGD(p, lr=0.1),
        "momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
        "adagrad": lambda p: torch.optim.Adagrad(p, lr=0.1),
        "rmsprop": lambda p: torch.optim.RMSprop(p, lr=0.1),
        "adam": lambda p: torch.optim.Adam(p, lr=0.1),
        "adamw": lambda p: torch.optim.AdamW(p, lr=0.1),
    }
    opt = builders[optimizer]([param])
    opt.step()
    # Scalars such as Adam's "step" counter are not per-parameter memory.
    return sum(1 for v in opt.state[param].values() if isinstance(v, torch.Tensor) and v.shape == param.shape)


def measured_deep_linear(batch: int, dim: int, num_layers: int, optimizer: str, dtype: torch.dtype) -> dict:
    """Bytes of the deep linear model, measured on a real model in ``dtype``."""
    torch.manual_seed(0)
    hidden = [torch.nn.Linear(dim, dim, bias=False, dtype=dtype) for _ in range(num_layers)]
    model = torch.nn.Sequential(*hidden, torch.nn.Linear(dim, 1, bias=False, dtype=dtype))
    saved: list[torch.Tensor] = []
    for layer in hidden:
        layer.register_forward_hook(lambda module, inputs, output: saved.append(output))
    model(torch.randn(batch, dim, dtype=dtype)).sum().backward()
    params = list(model.parameters())
    num_params = sum(p.numel() for p in params)
    return {
        "parameters": sum(p.numel() * p.element_size() for p in params),
        "activations": sum(t.numel() * t.element_size() for t in saved),
        "gradients": sum(p.grad.numel() * p.grad.element_size() for p in params),
        "optimizer_state": state_tensors(optimizer) * num_params * 4,  # the contract keeps state in float32
    }


def same_float(got: object, want: float) -> bool:
    """Equal as floats (an int is read as one): NaN by isnan, zeros by sign."""
    return isinstance(got, (int, float)) and not isinstance(got, bool) and same(float(got), want)


def check_patterns(sub, dtype: torch.dtype, patterns: list[int]) -> None:
    """Decode ``patterns`` in the worker and compare each with PyTorch (in the judge).

    One round trip for all: the judge has the worker map the submission's own ``decode_float``
    over the patterns (``list(map(...))``, library code; the dtype repeated there, not sent once per
    pattern); if that raises, the patterns are sent one call at a time, so the message names the
    first one that fails."""
    try:
        dtypes = sub.lib("itertools.repeat", dtype)
        got = sub.lib("builtins.list", sub.lib("builtins.map", sub.named("memory.decode_float"), patterns, dtypes),
                      timeout=120).read()
    except StudentError:
        got = [sub.call("memory.decode_float", bits, dtype) for bits in patterns]
    want = torch_values(dtype, patterns)
    width = 2 * dtype.itemsize
    assert isinstance(got, list) and len(got) == len(patterns), (
        f"memory.decode_float answered {got!r}, expected one float per pattern")
    for bits, value, expected in zip(patterns, got, want):
        call = f"memory.decode_float({bits:#0{width + 2}x}, {dtype})"
        assert same_float(value, expected), (
            f"{call} returned {value!r}, expected {expected!r} (what PyTorch reads in these bits)")


# --- strategies ---------------------------------------------------------------------------------

def magnitudes() -> st.SearchStrategy[float]:
    """Nonzero finite floats spread over every exponent that matters for underflow."""
    scaled = st.builds(math.ldexp, st.floats(0.5, 1.0, exclude_max=True), st.integers(-1075, 20))
    return (scaled | st.floats(allow_nan=False, allow_infinity=False)).filter(lambda v: v != 0)


def float32_patterns() -> st.SearchStrategy[list[int]]:
    """float32 bit patterns, weighted towards the interesting exponents (0, 1, 254, 255)."""
    special = st.builds(lambda s, e, m: (s << 31) | (e << 23) | m, st.integers(0, 1),
                        st.sampled_from([0, 1, 2, 126, 127, 128, 253, 254, 255]), st.integers(0, 2**23 - 1))
    return st.lists(st.integers(0, 2**32 - 1) | special, min_size=1, max_size=400)


# --- tests --------------------------------------------------------------------------------------

@pytest.mark.rule("P1.element-size")
@pytest.mark.points(0.75)
def test_bytes_per_element(sub):
    """bytes_per_element matches element_size() for every listed dtype"""
    for dtype in SIZED_DTYPES:
        got = sub.call("memory.bytes_per_element", dtype)
        want = torch.empty((), dtype=dtype).element_size()
        assert type(got) is int and got == want, f"memory.bytes_per_element({dtype}) returned {got!r}, expected {want}"


@pytest.mark.rule("P1.tensor-bytes")
@pytest.mark.points(0.5)
@given(shape=st.lists(st.integers(0, 7), max_size=5), dtype=st.sampled_from(SIZED_DTYPES))
def test_tensor_memory_bytes(sub, shape, dtype):
    """tensor_memory_bytes matches real tensors (a scalar shape and size-0 dims included)"""
    tensor = torch.empty(shape, dtype=dtype)
    want = tensor.numel() * tensor.element_size()
    for spelled in (tuple(shape), list(shape)):
        got = sub.call("memory.tensor_memory_bytes", spelled, dtype)
        assert type(got) is int and got == want, (
            f"memory.tensor_memory_bytes({spelled!r}, {dtype}) returned {got!r}, expected {want}")


@pytest.mark.rule("P1.tensor-bytes-no-alloc")
@pytest.mark.points(0.25)
@settings(max_examples=3)
@given(sizes=st.lists(st.integers(10**4, 10**5), min_size=3, max_size=3), dtype=st.sampled_from(SIZED_DTYPES))
def test_tensor_memory_bytes_answers_instantly(sub, sizes, dtype):
    """tensor_memory_bytes answers instantly for 10**12 to 10**15 elements: arithmetic, no tensor built"""
    want = math.prod(sizes) * torch.empty((), dtype=dtype).element_size()
    # Terabytes at least: only arithmetic answers within the 5 s given here.
    got = sub.call("memory.tensor_memory_bytes", tuple(sizes), dtype, timeout=5)
    assert got == want, f"memory.tensor_memory_bytes({tuple(sizes)}, {dtype}) returned {got!r}, expected {want}"


@pytest.mark.rule("P1.float-layout")
@pytest.mark.points(0.75)
def test_float_layout(sub):
    """float_layout gives (sign, exponent, mantissa) bits that agree with torch.finfo"""
    for dtype in LAYOUT_DTYPES:
        info = torch.finfo(dtype)
        mantissa = -int(math.log2(info.eps))  # eps = 2**-M for these six formats
        want = (1, info.bits - 1 - mantissa, mantissa)
        got = sub.call("memory.float_layout", dtype)
        assert same(got, want), (
            f"memory.float_layout({dtype}) returned {got!r} ({type_tree(got)}), expected {want} (plain ints)")


@pytest.mark.rule("P1.decode-float")
@pytest.mark.points(0.75)
def test_decode_float_every_float16_pattern(sub):
    """decode_float reads all 2**16 float16 patterns as PyTorch does"""
    check_patterns(sub, torch.float16, list(range(2**16)))


@pytest.mark.rule("P1.decode-float")
@pytest.mark.points(0.75)
def test_decode_float_every_bfloat16_pattern(sub):
    """decode_float reads all 2**16 bfloat16 patterns as PyTorch does"""
    check_patterns(sub, torch.bfloat16, list(range(2**16)))


@pytest.mark.rule("P1.decode-float")
@pytest.mark.points(0.75)
def test_decode_float_every_float8_pattern(sub):
    """decode_float reads all 2**8 float8_e4m3fn and float8_e5m2 patterns as PyTorch does"""
    check_patterns(sub, torch.float8_e4m3fn, list(range(2**8)))
    check_patterns(sub, torch.float8_e5m2, list(range(2**8)))


@pytest.mark.rule("P1.decode-float")
@pytest.mark.points(0.5)
@given(patterns=float32_patterns())
def test_decode_float_float32_patterns(sub, patterns):
    """decode_float reads sampled float32 patterns (zeros, subnormals, normals, inf, NaN) as PyTorch does"""
    check_patterns(sub, torch.float32, patterns)


DECODED = [torch.float32, torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2]


@pytest.mark.rule("P1.subnormals")
@pytest.mark.points(0.25)
@settings(max_examples=10)
@given(mantissas=st.lists(st.integers(1, 2**23 - 1), min_size=1, max_size=20))
def test_decode_float_subnormals(sub, mantissas):
    """decode_float reads subnormals (exponent field 0) as m/2^M * 2^(1 - bias), with either sign"""
    for dtype in DECODED:
        _, _, mantissa_bits = layout(dtype)
        width = 8 * dtype.itemsize
        fields = sorted({1, 2**mantissa_bits - 1, *(m % 2**mantissa_bits or 1 for m in mantissas)})
        check_patterns(sub, dtype, [sign << (width - 1) | m for m in fields for sign in (0, 1)])


@pytest.mark.rule("P1.signed-zero")
@pytest.mark.points(0.25)
def test_decode_float_signed_zeros(sub):
    """decode_float reads the sign bit alone as -0.0 and all zeros as 0.0"""
    for dtype in DECODED:
        check_patterns(sub, dtype, [0, 1 << (8 * dtype.itemsize - 1)])


@pytest.mark.rule("P1.e4m3fn-nan")
@pytest.mark.points(0.25)
def test_decode_float_e4m3fn_top_exponent(sub):
    """float8_e4m3fn's all-ones exponent holds numbers (256 to 448), and only S.1111.111 is NaN"""
    check_patterns(sub, torch.float8_e4m3fn, [sign << 7 | 0b1111 << 3 | m for sign in (0, 1) for m in range(8)])


@pytest.mark.rule("P1.decode-from-layout")
@pytest.mark.points(0.75)
def test_decode_float_uses_bit_arithmetic(sub):
    """decode_float decodes from the layout (no .view/frombuffer/struct/numpy reinterpretation)"""
    check_patterns(sub, torch.float16, [0x3C00, 0x8000, 0x0001, 0x7C00])
    sub.source("memory")  # the source text is read (a replay cannot follow)
    found = public_module("_layout_reader.py").reinterpretations(sub.source_dir)
    assert not found, (
        "memory.decode_float (or a helper it uses) reinterprets bits instead of decoding the layout: "
        f"{', '.join(found[:5])}; use shifts, masks and math.ldexp (handout.md, section 'memory.decode_float')")


def check_underflows(sub, dtype: torch.dtype, values: list[float]) -> None:
    for value in values:
        want = underflows(value, dtype)
        got = sub.call("memory.underflows_to_zero", value, dtype)
        assert got is want, (
            f"memory.underflows_to_zero({value!r} = {float(value).hex()}, {dtype}) returned {got!r}, expected {want} "
            f"(torch.tensor(value, dtype=torch.float64).to({dtype}) {'is' if want else 'is not'} 0)")


IEEE_UNDERFLOW_DTYPES = [d for d in UNDERFLOW_DTYPES if "fnuz" not in str(d)]
FNUZ = [torch.float8_e4m3fnuz, torch.float8_e5m2fnuz]


@pytest.mark.rule("P1.underflow")
@pytest.mark.points(0.5)
@given(dtype=st.sampled_from(UNDERFLOW_DTYPES), values=st.lists(magnitudes(), min_size=1, max_size=15))
def test_underflows_to_zero(sub, dtype, values):
    """underflows_to_zero agrees with torch's float64 -> dtype conversion on values of every magnitude"""
    check_underflows(sub, dtype, values + [5e-324, -1e-300, 1e-50, 3])  # an int is a value too


@pytest.mark.rule("P1.underflow-ties")
@pytest.mark.points(0.25)
def test_underflows_to_zero_at_half_the_smallest_subnormal(sub):
    """exactly half the smallest subnormal underflows (ties to even), its neighbours as torch rounds them"""
    for dtype in IEEE_UNDERFLOW_DTYPES[1:]:  # float64 never underflows
        half = smallest_subnormal(dtype) / 2
        check_underflows(sub, dtype, [v for h in (half, -half) for v in (h, h * 1.5, h * 0.75, h * (1 + 2**-22))])


@pytest.mark.rule("P1.underflow-float32-first")
@pytest.mark.points(0.25)
def test_underflows_to_zero_rounds_to_float32_first(sub):
    """values that reach half the smallest subnormal only through PyTorch's first rounding to float32"""
    for dtype in UNDERFLOW_DTYPES[2:]:  # below float32: the first rounding is to float32
        half = smallest_subnormal(dtype) / 2
        near = [half * (1 + 2**-30), half * (1 - 2**-30), math.nextafter(half, math.inf), math.nextafter(half, 0.0)]
        check_underflows(sub, dtype, [sign * v for v in near for sign in (1.0, -1.0)])


@pytest.mark.rule("P1.fnuz-bias")
@pytest.mark.points(0.25)
def test_underflows_to_zero_fnuz(sub):
    """the fnuz float8s underflow at half their smallest subnormal (bias 8 and 16, one more than IEEE's)"""
    for dtype in FNUZ:
        half = smallest_subnormal(dtype) / 2
        check_underflows(sub, dtype, [half, half * 1.5, half * 2, half * 3, half / 2, -half * 1.5, -half * 3])


@pytest.mark.rule("P1.training-bytes")
@pytest.mark.points(0.5)
def test_training_bytes_per_param(sub):
    """training_bytes_per_param counts parameter, gradient and real torch.optim state tensors (float32)"""
    for optimizer in OPTIMIZERS:
        for dtype in PARAM_DTYPES:
            want = 2 * torch.empty((), dtype=dtype).element_size() + 4 * state_tensors(optimizer)
            got = sub.call("memory.training_bytes_per_param", optimizer, dtype)
            assert type(got) is int and got == want, (
                f"memory.training_bytes_per_param({optimizer!r}, {dtype}) returned {got!r}, expected {want} "
                f"(parameter + gradient in {dtype}, {state_tensors(optimizer)} float32 state tensor(s))")
    default = sub.call("memory.training_bytes_per_param", "adamw")
    assert default == 16, f"memory.training_bytes_per_param('adamw') returned {default!r}, expected 16"


@pytest.mark.rule("P1.max-params")
@pytest.mark.points(0.5)
@settings(max_examples=10)
@given(big=st.tuples(st.integers(1, 4096), st.integers(2**60, 2**70), st.integers(3, 99)))
def test_max_trainable_params(sub, big):
    """max_trainable_params is the floor as an int, exact for counts past a float's 53 bits; the lecture's 4e10"""
    cases = [((8, 80e9, 16), 40_000_000_000), ((1, 100, 16), 6), ((3, 10, 7), 4), ((0, 80e9, 16), 0), ((8, 0, 16), 0),
             ((1024, 80 * 2**30, 12), 7_330_077_518_506), ((4.0, 24e9, 12.0), 8_000_000_000),
             (big, big[0] * big[1] // big[2])]
    for args, want in cases:
        got = sub.call("memory.max_trainable_params", *args)
        assert type(got) is int and got == want, (
            f"memory.max_trainable_params{args} returned {got!r}, expected {want} (the floor, as an int, "
            "divided on ints)")


def check_deep_linear(sub, batch: int, dim: int, num_layers: int, optimizer: str, dtype: torch.dtype) -> None:
    want = measured_deep_linear(batch, dim, num_layers, optimizer, dtype)
    want["total"] = sum(want.values())
    got = sub.call("memory.deep_linear_memory", batch, dim, num_layers, optimizer, dtype)
    call = f"memory.deep_linear_memory({batch}, {dim}, {num_layers}, {optimizer!r}, {dtype})"
    assert isinstance(got, dict) and set(got) == set(want), f"{call} returned {got!r}, expected the keys {sorted(want)}"
    for key, value in want.items():
        assert type(got[key]) is int and got[key] == value, f"{call}[{key!r}] is {got[key]!r}, expected {value}"


@pytest.mark.rule("P1.deep-linear")
@pytest.mark.points(0.5)
@given(batch=st.integers(1, 5), dim=st.integers(1, 6), num_layers=st.integers(0, 3),
       optimizer=st.sampled_from(OPTIMIZERS), dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.float64]))
def test_deep_linear_memory(sub, batch, dim, num_layers, optimizer, dtype):
    """deep_linear_memory matches a real nn.Linear stack (parameters, hooked activations, gradients, optimizer state)"""
    check_deep_linear(sub, batch, dim, num_layers, optimizer, dtype)
    lecture = sub.call("memory.deep_linear_memory", 2, 4, 2)
    assert isinstance(lecture, dict) and lecture.get("total") == 496, (
        f"memory.deep_linear_memory(2, 4, 2) returned {lecture!r}, expected a total of 496 bytes (the lecture's example)")


@pytest.mark.rule("P1.deep-linear-head")
@pytest.mark.points(0.25)
@settings(max_examples=10)
@given(batch=st.integers(1, 5), dim=st.integers(1, 6), optimizer=st.sampled_from(OPTIMIZERS))
def test_deep_linear_memory_head(sub, batch, dim, optimizer):
    """the head alone (no hidden layer) has dim parameters and no activation"""
    check_deep_linear(sub, batch, dim, 0, optimizer, torch.float32)


@pytest.mark.rule("P1.deep-linear-state-float32")
@pytest.mark.points(0.25)
@settings(max_examples=10)
@given(batch=st.integers(1, 5), dim=st.integers(1, 6), num_layers=st.integers(1, 3),
       optimizer=st.sampled_from(["momentum", "adagrad", "adam"]), dtype=st.sampled_from([torch.bfloat16, torch.float16]))
def test_deep_linear_memory_state_in_float32(sub, batch, dim, num_layers, optimizer, dtype):
    """optimizer state stays float32 (4 bytes a state) when the model is in bfloat16 or float16"""
    check_deep_linear(sub, batch, dim, num_layers, optimizer, dtype)


def layout(dtype: torch.dtype) -> tuple[int, int, int]:
    """(sign, exponent, mantissa) bits of ``dtype``, from torch.finfo (eps = 2**-M for these formats)."""
    info = torch.finfo(dtype)
    mantissa = -int(math.log2(info.eps))
    return 1, info.bits - 1 - mantissa, mantissa


def deep_linear_call(batch: int, dim: int, layers: int) -> tuple[tuple, dict]:
    deep = measured_deep_linear(batch, dim, layers, "adagrad", torch.float32)  # the defaults
    return (batch, dim, layers), {**deep, "total": sum(deep.values())}


# One valid call of each function and the answer torch gives (or the formula), drawn for each example:
# error paths count only beside working code.
VALID = {
    "memory.bytes_per_element": st.sampled_from(SIZED_DTYPES).map(
        lambda d: ((d,), torch.empty((), dtype=d).element_size())),
    "memory.tensor_memory_bytes": st.tuples(st.lists(st.integers(0, 7), max_size=4).map(tuple),
                                            st.sampled_from(SIZED_DTYPES)).map(
        lambda a: (a, torch.empty(a[0], dtype=a[1]).nbytes)),
    "memory.float_layout": st.sampled_from(LAYOUT_DTYPES).map(lambda d: ((d,), layout(d))),
    "memory.decode_float": st.tuples(st.integers(0, 2**16 - 1), st.sampled_from([torch.float16, torch.bfloat16])).filter(
        lambda a: not math.isnan(torch_values(a[1], [a[0]])[0])).map(lambda a: (a, torch_values(a[1], [a[0]])[0])),
    "memory.underflows_to_zero": st.tuples(magnitudes(), st.sampled_from(UNDERFLOW_DTYPES)).map(
        lambda a: (a, underflows(*a))),
    "memory.training_bytes_per_param": st.tuples(st.sampled_from(OPTIMIZERS), st.sampled_from(PARAM_DTYPES)).map(
        lambda a: (a, 2 * torch.empty((), dtype=a[1]).element_size() + 4 * state_tensors(a[0]))),
    "memory.max_trainable_params": st.tuples(st.integers(0, 1024), st.integers(0, 2**40), st.integers(1, 32)).map(
        lambda a: (a, a[0] * a[1] // a[2])),
    "memory.deep_linear_memory": st.builds(deep_linear_call, st.integers(1, 4), st.integers(1, 5), st.integers(0, 2)),
}


def refuses(sub, target: str, valid: tuple[tuple, object], cases: list[tuple]) -> None:
    """``target`` answers the drawn valid call, and raises ValueError for each of ``cases``."""
    answers(sub, target, *valid)
    for args in cases:
        sub.raises(ValueError, target, *args)


@pytest.mark.rule("P1.element-size-refuses")
@pytest.mark.points(0.25)
@settings(max_examples=3)
@given(valid=VALID["memory.bytes_per_element"])
def test_bytes_per_element_refuses_other_dtypes(sub, valid):
    """bytes_per_element raises ValueError for sub-byte and quantized dtypes, and for what is not a dtype"""
    refuses(sub, "memory.bytes_per_element", valid, [(dtype,) for dtype in UNSUPPORTED_DTYPES]
            + [("float32",), (None,), (8,)])


@pytest.mark.rule("P1.tensor-bytes-refuses", "ALL.errors")
@pytest.mark.points(0.25)
@settings(max_examples=3)
@given(valid=VALID["memory.tensor_memory_bytes"])
def test_tensor_memory_bytes_refuses(sub, valid):
    """tensor_memory_bytes raises ValueError for any negative size (two, or one beside a 0) or an unsupported dtype"""
    refuses(sub, "memory.tensor_memory_bytes", valid, [((2, -1), torch.float32), ((-3,), torch.int8),
                                                       ((-2, -3), torch.float32), ((0, -1), torch.float16),
                                                       ((2, 3), torch.qint8), ((0, 3), torch.qint8),
                                                       ((), torch.quint8)])


@pytest.mark.rule("P1.float-layout-refuses")
@pytest.mark.points(0.25)
@settings(max_examples=3)
@given(valid=VALID["memory.float_layout"])
def test_float_layout_refuses_other_dtypes(sub, valid):
    """float_layout raises ValueError for a dtype other than its six floating-point formats"""
    refuses(sub, "memory.float_layout", valid, [(torch.int32,), (torch.bool,), (torch.float8_e4m3fnuz,),
                                                (torch.complex64,)])


@pytest.mark.rule("P1.decode-refuses")
@pytest.mark.points(0.25)
@settings(max_examples=3)
@given(valid=VALID["memory.decode_float"])
def test_decode_float_refuses(sub, valid):
    """decode_float raises ValueError for a pattern outside [0, 2**bits) or a dtype it does not read"""
    refuses(sub, "memory.decode_float", valid, [(2**16, torch.float16), (-1, torch.float8_e4m3fn),
                                                (256, torch.float8_e5m2), (2**32, torch.float32),
                                                (2**16 + 5, torch.bfloat16), (0, torch.int16), (0, torch.float64)])


@pytest.mark.rule("P1.underflow-refuses")
@pytest.mark.points(0.25)
@settings(max_examples=3)
@given(valid=VALID["memory.underflows_to_zero"])
def test_underflows_to_zero_refuses(sub, valid):
    """underflows_to_zero raises ValueError for a zero, infinite or NaN value, or a dtype it does not know"""
    refuses(sub, "memory.underflows_to_zero", valid, [
        (0.0, torch.float16), (-0.0, torch.float16), (math.inf, torch.bfloat16), (-math.inf, torch.float8_e5m2),
        (math.nan, torch.float32), (1e-8, torch.int32), *[(1e-8, dtype) for dtype in E8M0]])


@pytest.mark.rule("P1.training-bytes-refuses")
@pytest.mark.points(0.25)
@settings(max_examples=3)
@given(valid=VALID["memory.training_bytes_per_param"])
def test_training_bytes_per_param_refuses(sub, valid):
    """training_bytes_per_param raises ValueError for an unknown optimizer name or an unsupported dtype"""
    refuses(sub, "memory.training_bytes_per_param", valid, [("lion",), ("sgdm",), ("Adam",), ("adam", torch.qint8)])


@pytest.mark.rule("P1.max-params-refuses", "ALL.counts")
@pytest.mark.points(0.25)
@settings(max_examples=3)
@given(valid=VALID["memory.max_trainable_params"])
def test_max_trainable_params_refuses(sub, valid):
    """max_trainable_params raises ValueError for bytes_per_param 0 and for negative or non-whole counts"""
    refuses(sub, "memory.max_trainable_params", valid, [(-1, 80e9, 16), (8, 80.5, 16), (8, -80e9, 16),
                                                        (8, 80e9, 0), (8, 80e9, 2.5), (2.5, 80e9, 16)])


@pytest.mark.rule("P1.deep-linear-refuses")
@pytest.mark.points(0.25)
@settings(max_examples=3)
@given(valid=VALID["memory.deep_linear_memory"])
def test_deep_linear_memory_refuses(sub, valid):
    """deep_linear_memory raises ValueError for an unknown optimizer, an unsupported dtype, or a bad count"""
    refuses(sub, "memory.deep_linear_memory", valid, [(-1, 4, 2), (2, 4.5, 2), (2, 4, -2), (2, 4, 2, "lion"),
                                                      (2, 4, 2, "adam", torch.qint8)])


@pytest.mark.points(0.25)
@settings(max_examples=3)
@given(valid=st.tuples(*VALID.values()))
def test_wrong_types_raise_or_answer_as_the_right_type(sub, valid):
    """an argument of the wrong type raises ValueError or TypeError, or is answered as the same value in the right type"""
    # Each function answers a valid call too, drawn for each example (not one to memorize).
    for target, call in zip(VALID, valid):
        answers(sub, target, *call)
    wrong_types = [  # (call, the same call in the right type): either answer, or ValueError / TypeError
        ("memory.tensor_memory_bytes", (6, torch.float32), ((6,), torch.float32)),  # torch.empty(6) is 1-D
        ("memory.tensor_memory_bytes", ((2, 3.0), torch.float32), ((2, 3), torch.float32)),
        ("memory.tensor_memory_bytes", ((2, True), torch.float32), ((2, 1), torch.float32)),
        ("memory.decode_float", (True, torch.float16), (1, torch.float16)),
        ("memory.decode_float", (1.0, torch.float16), (1, torch.float16)),
        ("memory.underflows_to_zero", (True, torch.float16), (1.0, torch.float16)),
        ("memory.underflows_to_zero", ("1e-8", torch.float16), (1e-8, torch.float16)),
    ]
    for target, args, like in wrong_types:
        refused_or_as_for(sub, target, args, like)
    floats = sub.call("memory.deep_linear_memory", 2.0, 4.0, 2.0)
    ints = sub.call("memory.deep_linear_memory", 2, 4, 2)
    assert floats == ints, (
        f"memory.deep_linear_memory(2.0, 4.0, 2.0) returned {floats!r}, expected the same as (2, 4, 2): {ints!r}")
