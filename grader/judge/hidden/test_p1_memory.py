"""Hidden suite for P1 (memory.py): dtype sizes, float bit patterns, underflow, training memory.

Oracles: ``element_size()``, ``torch.finfo``, PyTorch's own reading of every bit pattern,
``Tensor.to`` for underflow, real ``nn.Linear`` stacks and ``torch.optim`` state for memory.
"""

from __future__ import annotations

import ast
import functools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grader.judge.drivers.same import same
from grader.judge.hidden._contract import answers, refused_or_as_for, type_tree
from grader.judge.handle import StudentError

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


def boundary_values(dtype: torch.dtype) -> list[float]:
    """Values at the underflow boundary of ``dtype``: half the smallest subnormal, its float64
    neighbours, and values that round onto it only through float32 (PyTorch rounds to float32 first)."""
    half = smallest_subnormal(dtype) / 2 if dtype != torch.float64 else 5e-324
    near = [half, math.nextafter(half, math.inf), math.nextafter(half, 0.0), half * (1 + 2**-30),
            half * (1 + 2**-22), half * (1 - 2**-30), half * 1.5, half * 0.75, half * 2, half / 2]
    return [sign * v for v in near if v > 0 for sign in (1.0, -1.0)]


def float32_patterns() -> st.SearchStrategy[list[int]]:
    """float32 bit patterns, weighted towards the interesting exponents (0, 1, 254, 255)."""
    special = st.builds(lambda s, e, m: (s << 31) | (e << 23) | m, st.integers(0, 1),
                        st.sampled_from([0, 1, 2, 126, 127, 128, 253, 254, 255]), st.integers(0, 2**23 - 1))
    return st.lists(st.integers(0, 2**32 - 1) | special, min_size=1, max_size=400)


# --- tests --------------------------------------------------------------------------------------

@pytest.mark.points(1)
def test_bytes_per_element(sub):
    """bytes_per_element matches element_size() and rejects sub-byte and quantized dtypes"""
    for dtype in SIZED_DTYPES:
        got = sub.call("memory.bytes_per_element", dtype)
        want = torch.empty((), dtype=dtype).element_size()
        assert type(got) is int and got == want, f"memory.bytes_per_element({dtype}) returned {got!r}, expected {want}"
    for dtype in UNSUPPORTED_DTYPES:
        sub.raises(ValueError, "memory.bytes_per_element", dtype)


@pytest.mark.points(1)
@given(shape=st.lists(st.integers(0, 7), max_size=5), dtype=st.sampled_from(SIZED_DTYPES))
def test_tensor_memory_bytes(sub, shape, dtype):
    """tensor_memory_bytes matches real tensors and answers instantly for 10**12 elements"""
    tensor = torch.empty(shape, dtype=dtype)
    want = tensor.numel() * tensor.element_size()
    for spelled in (tuple(shape), list(shape)):
        got = sub.call("memory.tensor_memory_bytes", spelled, dtype)
        assert type(got) is int and got == want, (
            f"memory.tensor_memory_bytes({spelled!r}, {dtype}) returned {got!r}, expected {want}")
    huge = (10**4, 10**4, 10**4)
    # 10**12 float64 elements are 8 TB: only arithmetic answers within the 5 s given here.
    got = sub.call("memory.tensor_memory_bytes", huge, torch.float64, timeout=5)
    assert got == 8 * 10**12, f"memory.tensor_memory_bytes({huge}, torch.float64) returned {got!r}, expected {8 * 10**12}"


@pytest.mark.points(1)
def test_float_layout(sub):
    """float_layout gives (sign, exponent, mantissa) bits that agree with torch.finfo"""
    for dtype in LAYOUT_DTYPES:
        info = torch.finfo(dtype)
        mantissa = -int(math.log2(info.eps))  # eps = 2**-M for these six formats
        want = (1, info.bits - 1 - mantissa, mantissa)
        got = sub.call("memory.float_layout", dtype)
        assert same(got, want), (
            f"memory.float_layout({dtype}) returned {got!r} ({type_tree(got)}), expected {want} (plain ints)")


@pytest.mark.points(1)
def test_decode_float_every_float16_pattern(sub):
    """decode_float reads all 2**16 float16 patterns as PyTorch does"""
    check_patterns(sub, torch.float16, list(range(2**16)))


@pytest.mark.points(1)
def test_decode_float_every_bfloat16_pattern(sub):
    """decode_float reads all 2**16 bfloat16 patterns as PyTorch does"""
    check_patterns(sub, torch.bfloat16, list(range(2**16)))


@pytest.mark.points(1)
def test_decode_float_every_float8_pattern(sub):
    """decode_float reads all 2**8 float8_e4m3fn and float8_e5m2 patterns as PyTorch does"""
    check_patterns(sub, torch.float8_e4m3fn, list(range(2**8)))
    check_patterns(sub, torch.float8_e5m2, list(range(2**8)))


@pytest.mark.points(1)
@given(patterns=float32_patterns())
def test_decode_float_float32_patterns(sub, patterns):
    """decode_float reads sampled float32 patterns (zeros, subnormals, normals, inf, NaN) as PyTorch does"""
    check_patterns(sub, torch.float32, patterns)


# What decode_float (and whatever it uses) must not touch: ways to reinterpret bits as a float.
_REINTERPRETING_CALLS = {"view", "view_as", "frombuffer", "from_buffer", "from_buffer_copy", "from_numpy",
                         "unpack", "unpack_from", "iter_unpack", "astype", "tobytes"}
_REINTERPRETING_MODULES = {"struct", "ctypes"}
_FLOAT_TYPE_MODULES = {"numpy", "ml_dtypes"}
_FLOAT_TYPES = {"float16", "float32", "float64", "half", "single", "double", "float_", "bfloat16", "longdouble"}


def _imports(tree: ast.Module) -> dict[str, str]:
    """Local name -> what it was imported as (``np`` -> ``numpy``, ``unpack`` -> ``struct.unpack``)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _reachable(tree: ast.Module, root: str) -> list[ast.AST]:
    """``root``'s definition plus the module-level definitions and assignments it (transitively) names."""
    defined: dict[str, list[ast.AST]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.setdefault(node.name, []).append(node)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        defined.setdefault(name.id, []).append(node)
    seen, todo, nodes = {root}, [root], []
    while todo:
        for node in defined.get(todo.pop(), []):
            nodes.append(node)
            for inner in ast.walk(node):
                if isinstance(inner, ast.Name) and inner.id in defined and inner.id not in seen:
                    seen.add(inner.id)
                    todo.append(inner.id)
    return nodes


def _reinterpretations(nodes: list[ast.AST], imports: dict[str, str]) -> list[str]:
    def banned_import(name: str) -> bool:
        module, _, member = imports.get(name, "").partition(".")
        return module in _REINTERPRETING_MODULES or (module in _FLOAT_TYPE_MODULES and member in _FLOAT_TYPES)

    found = []
    for node in (inner for top in nodes for inner in ast.walk(top)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _REINTERPRETING_CALLS:
            found.append(f".{node.func.attr}(...) on line {node.lineno}")
        elif isinstance(node, ast.Name) and (node.id in _REINTERPRETING_MODULES | {"memoryview"} or banned_import(node.id)):
            found.append(f"{node.id} on line {node.lineno}")
        elif (isinstance(node, ast.Attribute) and node.attr in _FLOAT_TYPES and isinstance(node.value, ast.Name)
              and imports.get(node.value.id, "").split(".")[0] in _FLOAT_TYPE_MODULES):
            found.append(f"{ast.unparse(node)} on line {node.lineno}")
    return found


@pytest.mark.points(1)
def test_decode_float_uses_bit_arithmetic(sub):
    """decode_float decodes from the layout (no .view/frombuffer/struct/numpy reinterpretation)"""
    check_patterns(sub, torch.float16, [0x3C00, 0x8000, 0x0001, 0x7C00])
    source = sub.source("memory")
    tree = ast.parse(source)
    nodes = _reachable(tree, "decode_float")
    assert nodes, "memory.py has no top-level function decode_float"
    found = _reinterpretations(nodes, _imports(tree))
    assert not found, (
        "memory.decode_float (or a helper it uses) reinterprets bits instead of decoding the layout: "
        f"{', '.join(found[:5])}; use shifts, masks and math.ldexp (handout.md, section 'memory.decode_float')")


@pytest.mark.points(1)
@given(dtype=st.sampled_from(UNDERFLOW_DTYPES), values=st.lists(magnitudes(), min_size=1, max_size=15))
def test_underflows_to_zero(sub, dtype, values):
    """underflows_to_zero agrees with torch's float64 -> dtype conversion, boundaries included"""
    for value in values + boundary_values(dtype):
        want = underflows(value, dtype)
        got = sub.call("memory.underflows_to_zero", value, dtype)
        assert got is want, (
            f"memory.underflows_to_zero({value!r} = {value.hex()}, {dtype}) returned {got!r}, expected {want} "
            f"(torch.tensor(value, dtype=torch.float64).to({dtype}) {'is' if want else 'is not'} 0)")


@pytest.mark.points(1)
def test_training_bytes_and_max_params(sub):
    """training_bytes_per_param counts real torch.optim state; max_trainable_params gives the lecture's 4e10"""
    for optimizer in OPTIMIZERS:
        for dtype in PARAM_DTYPES:
            want = 2 * torch.empty((), dtype=dtype).element_size() + 4 * state_tensors(optimizer)
            got = sub.call("memory.training_bytes_per_param", optimizer, dtype)
            assert type(got) is int and got == want, (
                f"memory.training_bytes_per_param({optimizer!r}, {dtype}) returned {got!r}, expected {want} "
                f"(parameter + gradient in {dtype}, {state_tensors(optimizer)} float32 state tensor(s))")
    default = sub.call("memory.training_bytes_per_param", "adamw")
    assert default == 16, f"memory.training_bytes_per_param('adamw') returned {default!r}, expected 16"
    lecture = sub.call("memory.max_trainable_params", 8, 80e9, 16)
    assert type(lecture) is int and lecture == 40_000_000_000, (
        f"memory.max_trainable_params(8, 80e9, 16) returned {lecture!r}, expected 40000000000 (an int)")
    for args, want in [((1, 100, 16), 6), ((3, 10, 7), 4), ((0, 80e9, 16), 0), ((1024, 80 * 2**30, 12), 7_330_077_518_506),
                       ((4.0, 24e9, 12.0), 8_000_000_000)]:
        got = sub.call("memory.max_trainable_params", *args)
        assert type(got) is int and got == want, (
            f"memory.max_trainable_params{args} returned {got!r}, expected {want} (the floor, as an int)")


@pytest.mark.points(1)
@given(batch=st.integers(1, 5), dim=st.integers(1, 6), num_layers=st.integers(0, 3),
       optimizer=st.sampled_from(OPTIMIZERS), dtype=st.sampled_from([torch.float32, torch.bfloat16, torch.float64]))
def test_deep_linear_memory(sub, batch, dim, num_layers, optimizer, dtype):
    """deep_linear_memory matches a real nn.Linear stack (parameters, hooked activations, gradients, optimizer state)"""
    want = measured_deep_linear(batch, dim, num_layers, optimizer, dtype)
    want["total"] = sum(want.values())
    got = sub.call("memory.deep_linear_memory", batch, dim, num_layers, optimizer, dtype)
    call = f"memory.deep_linear_memory({batch}, {dim}, {num_layers}, {optimizer!r}, {dtype})"
    assert isinstance(got, dict) and set(got) == set(want), f"{call} returned {got!r}, expected the keys {sorted(want)}"
    for key, value in want.items():
        assert type(got[key]) is int and got[key] == value, f"{call}[{key!r}] is {got[key]!r}, expected {value}"
    lecture = sub.call("memory.deep_linear_memory", 2, 4, 2)
    assert isinstance(lecture, dict) and lecture.get("total") == 496, (
        f"memory.deep_linear_memory(2, 4, 2) returned {lecture!r}, expected a total of 496 bytes (the lecture's example)")


def layout(dtype: torch.dtype) -> tuple[int, int, int]:
    """(sign, exponent, mantissa) bits of ``dtype``, from torch.finfo (eps = 2**-M for these formats)."""
    info = torch.finfo(dtype)
    mantissa = -int(math.log2(info.eps))
    return 1, info.bits - 1 - mantissa, mantissa


@st.composite
def valid_calls(draw) -> list[tuple[str, tuple, object]]:
    """One valid call of each function and the answer torch gives (or the formula), drawn for each example."""
    shape = tuple(draw(st.lists(st.integers(0, 7), max_size=4)))
    sized = draw(st.sampled_from(SIZED_DTYPES))
    formats = draw(st.sampled_from(LAYOUT_DTYPES))
    half = draw(st.sampled_from([torch.float16, torch.bfloat16]))
    pattern = draw(st.integers(0, 2**16 - 1).filter(lambda p: not math.isnan(torch_values(half, [p])[0])))
    value, small = draw(magnitudes()), draw(st.sampled_from(UNDERFLOW_DTYPES))
    optimizer, param = draw(st.sampled_from(OPTIMIZERS)), draw(st.sampled_from(PARAM_DTYPES))
    gpus, memory, per_param = draw(st.integers(0, 1024)), draw(st.integers(0, 2**40)), draw(st.integers(1, 32))
    batch, dim, layers = draw(st.integers(1, 4)), draw(st.integers(1, 5)), draw(st.integers(0, 2))
    deep = measured_deep_linear(batch, dim, layers, "adagrad", torch.float32)  # the defaults
    return [
        ("memory.tensor_memory_bytes", (shape, sized), torch.empty(shape, dtype=sized).nbytes),
        ("memory.float_layout", (formats,), layout(formats)),
        ("memory.decode_float", (pattern, half), torch_values(half, [pattern])[0]),
        ("memory.underflows_to_zero", (value, small), underflows(value, small)),
        ("memory.training_bytes_per_param", (optimizer, param),
         2 * torch.empty((), dtype=param).element_size() + 4 * state_tensors(optimizer)),
        ("memory.max_trainable_params", (gpus, memory, per_param), gpus * memory // per_param),
        ("memory.deep_linear_memory", (batch, dim, layers), {**deep, "total": sum(deep.values())}),
    ]


@pytest.mark.points(1)
@settings(max_examples=5)
@given(valid=valid_calls())
def test_rejects_arguments_outside_the_domain(sub, valid):
    """every function raises ValueError outside its domain (negative counts, bad dtypes, bad patterns); wrong types raise or answer as for the right type"""
    cases = [
        ("memory.tensor_memory_bytes", ((2, -1), torch.float32)),
        ("memory.tensor_memory_bytes", ((2, 3), torch.qint8)),
        ("memory.float_layout", (torch.int32,)),
        ("memory.decode_float", (2**16, torch.float16)),
        ("memory.decode_float", (-1, torch.float8_e4m3fn)),
        ("memory.decode_float", (256, torch.float8_e5m2)),
        ("memory.decode_float", (2**32, torch.float32)),
        ("memory.decode_float", (2**16 + 5, torch.float16)),
        ("memory.decode_float", (0, torch.int16)),
        ("memory.underflows_to_zero", (0.0, torch.float16)),
        ("memory.underflows_to_zero", (-0.0, torch.float16)),
        ("memory.underflows_to_zero", (math.inf, torch.bfloat16)),
        ("memory.underflows_to_zero", (math.nan, torch.float32)),
        *[("memory.underflows_to_zero", (1e-8, dtype)) for dtype in E8M0],
        ("memory.underflows_to_zero", (1e-8, torch.int32)),
        ("memory.training_bytes_per_param", ("lion",)),
        ("memory.max_trainable_params", (-1, 80e9, 16)),
        ("memory.max_trainable_params", (8, 80.5e0, 16)),
        ("memory.max_trainable_params", (8, 80e9, 0)),
        ("memory.deep_linear_memory", (-1, 4, 2)),
        ("memory.deep_linear_memory", (2, 4.5, 2)),
        ("memory.deep_linear_memory", (2, 4, 2, "lion")),
    ]
    # Each function answers a valid call too, drawn for each example (not one to memorize).
    for target, args, want in valid:
        answers(sub, target, args, want)
    for target, args in cases:
        sub.raises(ValueError, target, *args)
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
