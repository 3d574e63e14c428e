"""The wire format between the judge and the worker: tagged, versioned JSON with raw byte payloads, never pickle.

Values cross as plain data: JSON scalars, floats (a finite one as a JSON number, which Python writes and
reads back exactly, -0.0 included; NaN and the infinities tagged with their IEEE bits), tuples, dicts,
dtypes, tensors and arrays as dtype/shape/bytes, exceptions as the
qualified names of their classes plus the message, slices of ints, handles to objects the worker holds
(``Ref``) and judge functions the worker may call back (``Callback``). Anything else crosses as an ``Opaque``
(its type name and a short repr) that equals nothing. An ``int`` subclass is not an int.

A frame carries the bytes of tensors, arrays and ``bytes`` values beside its JSON, not inside it:
``encode`` leaves them as ``bytes`` in the data, ``frame`` writes each after the JSON and puts its number in
their place, and ``parse_frame`` puts them back (see "Framing" below).

Both sides import this module; it imports neither side. ``decode`` and ``parse_frame`` are strict: they are
what the judge runs on untrusted frames.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
import torch

VERSION = 2
MAX_FRAME = 512 * 1024 * 1024
MAX_DEPTH = 64
MAX_TEXT = 4000


_AS_IS = frozenset({type(None), bool, int, str})  # values that are their own encoding (finite floats too)
_AS_IS_DECODED = frozenset({type(None), bool, int, str, float})


class WireError(ValueError):
    """A frame or value that does not follow the format."""


@dataclass(frozen=True)
class Opaque:
    """A value that cannot cross as data; compares equal to nothing but an identical Opaque."""

    type: str
    repr: str


@dataclass(frozen=True)
class Ref:
    """A handle: an object the worker holds in its table (the judge only ever sees the number)."""

    id: int


@dataclass(frozen=True)
class Callback:
    """A judge function passed to the worker by number: calling it there asks the judge."""

    id: int


@dataclass(frozen=True)
class Raised:
    """An exception raised on the other side: the qualified names of its classes (MRO) and message."""

    types: tuple[str, ...]
    message: str

    @property
    def type(self) -> str:
        return self.types[0].rsplit(".", 1)[-1] if self.types else "?"

    def is_a(self, exc: type[BaseException] | str) -> bool:
        """Whether the exception was an instance of ``exc`` (a builtin class or a qualified name)."""
        name = exc if isinstance(exc, str) else f"{exc.__module__}.{exc.__qualname__}"
        return name in self.types

    def __str__(self) -> str:
        return f"{self.type}: {self.message}"


def _qualname(cls: type) -> str:
    return f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', getattr(cls, '__name__', '?'))}"


def _short(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 15] + "...[truncated]"


def _float_bits(value: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", value))[0]


def _tensor_bytes(tensor: torch.Tensor) -> bytes:
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    return flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b""


def encode_exception(exc: BaseException) -> dict:
    """An exception as its classes and message; the message of a refusal it was raised from follows (the
    worker's "code is reached by its name" hook refuses inside libraries, which may wrap the refusal)."""
    types = [_qualname(cls) for cls in type(exc).__mro__]
    try:
        message = str(exc)
        cause = exc.__cause__ or exc.__context__
        for _ in range(8):
            if cause is None or cause is exc:
                break
            if type(cause).__name__ == "Refused" and str(cause) not in message:
                message = f"{message} (raised from {cause})"
                break
            cause = cause.__cause__ or cause.__context__
    except BaseException:  # noqa: BLE001 - a hostile __str__ must not break the worker
        message = "<unprintable message>"
    return {"$t": "raised", "types": types, "message": _short(message)}


def encode(value: Any, depth: int = 0) -> Any:
    """Turn a value into JSON-ready data (exact types only; subclasses become Opaque)."""
    if depth > MAX_DEPTH:
        return _opaque(value, "nested too deeply")
    kind = type(value)
    if value is None or kind is bool or kind is str:
        return value
    if kind is int:
        return value
    if kind is float:
        return value if math.isfinite(value) else {"$t": "float", "bits": _float_bits(value)}
    if kind is complex:
        return {"$t": "complex", "re": _float_bits(value.real), "im": _float_bits(value.imag)}
    if kind is list:  # plain items (most of a long list) inline, without a call each
        return [item if type(item) in _AS_IS or (type(item) is float and -math.inf < item < math.inf)
                else encode(item, depth + 1) for item in value]
    if kind is tuple:
        return {"$t": "tuple", "items": [encode(item, depth + 1) for item in value]}
    if kind is dict:
        return {"$t": "dict", "items": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind is bytes:
        return {"$t": "bytes", "data": value}
    if kind is torch.dtype:
        return {"$t": "dtype", "name": str(value).removeprefix("torch.")}
    if kind is torch.device:
        return {"$t": "device", "name": str(value)}
    if kind is torch.Tensor or kind is torch.nn.Parameter:
        if value.layout != torch.strided or value.is_quantized:
            return _opaque(value, "not a dense tensor")
        return {"$t": "tensor", "dtype": str(value.dtype).removeprefix("torch."), "shape": list(value.shape),
                "device": str(value.device), "requires_grad": bool(value.requires_grad),
                "data": _tensor_bytes(value)}
    if kind is np.ndarray or kind is np.memmap:
        array = np.array(value, order="C")  # a copy; keeps 0-d arrays 0-d (ascontiguousarray would not)
        if array.dtype.hasobject:
            return _opaque(value, "object array")
        return {"$t": "ndarray", "dtype": array.dtype.str, "shape": list(array.shape), "data": array.tobytes()}
    if isinstance(value, np.generic) and kind.__module__ == "numpy":
        return {"$t": "npscalar", "dtype": value.dtype.str, "data": value.tobytes()}
    if kind is np.dtype or (isinstance(value, np.dtype) and kind.__module__.startswith("numpy")):
        return {"$t": "npdtype", "name": value.str}
    if isinstance(value, type) and issubclass(value, np.generic) and value.__module__ == "numpy":
        return {"$t": "npdtype", "name": np.dtype(value).str}
    if kind is slice:
        return {"$t": "slice", "items": [encode(value.start, depth + 1), encode(value.stop, depth + 1),
                                         encode(value.step, depth + 1)]}
    if kind is Ref or kind is Callback:
        return {"$t": "ref" if kind is Ref else "callback", "id": value.id}
    if isinstance(value, BaseException):
        return encode_exception(value)
    return _opaque(value)


def _opaque(value: Any, why: str = "") -> dict:
    try:
        text = repr(value)
    except BaseException:  # noqa: BLE001
        text = "<unprintable>"
    return {"$t": "opaque", "type": _qualname(type(value)), "repr": _short(f"{text} ({why})" if why else text)}


def _expect(condition: bool, what: str) -> None:
    if not condition:
        raise WireError(what)


def _torch_dtype(name: Any) -> torch.dtype:
    _expect(isinstance(name, str) and name.isidentifier(), f"bad dtype name {name!r}")
    dtype = getattr(torch, name, None)
    _expect(isinstance(dtype, torch.dtype), f"unknown torch dtype {name!r}")
    return dtype


def _shape(shape: Any) -> list[int]:
    _expect(isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape), f"bad shape {shape!r}")
    return shape


def _bytes(data: Any) -> bytes | memoryview:
    _expect(type(data) in (bytes, memoryview), "bad byte payload")
    return data


def _float(bits: Any) -> float:
    _expect(type(bits) is int and 0 <= bits < 2**64, f"bad float bits {bits!r}")
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def decode(data: Any, depth: int = 0) -> Any:
    """Rebuild a value from JSON data; strict, for untrusted input."""
    _expect(depth <= MAX_DEPTH + 1, "value nested too deeply")
    if data is None or type(data) in (bool, int, str, float):
        return data
    if type(data) is list:
        return [item if type(item) in _AS_IS_DECODED else decode(item, depth + 1) for item in data]
    _expect(type(data) is dict and isinstance(data.get("$t"), str), f"untagged value {str(data)[:80]!r}")
    tag = data["$t"]
    if tag == "float":
        return _float(data.get("bits"))
    if tag == "complex":
        return complex(_float(data.get("re")), _float(data.get("im")))
    if tag == "tuple":
        _expect(type(data.get("items")) is list, "bad tuple")
        return tuple(decode(item, depth + 1) for item in data["items"])
    if tag == "dict":
        items = data.get("items")
        _expect(type(items) is list and all(type(p) is list and len(p) == 2 for p in items), "bad dict")
        return {_hashable(decode(k, depth + 1)): decode(v, depth + 1) for k, v in items}
    if tag == "bytes":
        return bytes(_bytes(data.get("data")))
    if tag == "dtype":
        return _torch_dtype(data.get("name"))
    if tag == "device":
        _expect(isinstance(data.get("name"), str), "bad device")
        return torch.device(data["name"])
    if tag in _ARRAYS:
        return _ARRAYS[tag](data)
    if tag == "raised":
        types = data.get("types")
        _expect(type(types) is list and all(isinstance(t, str) for t in types), "bad exception types")
        _expect(isinstance(data.get("message"), str), "bad exception message")
        return Raised(tuple(types), _short(data["message"]))
    if tag == "slice":
        items = data.get("items")
        _expect(type(items) is list and len(items) == 3, "bad slice")
        bounds = [decode(item, depth + 1) for item in items]
        _expect(all(b is None or type(b) is int for b in bounds), "slice bounds must be ints or None")
        return slice(*bounds)
    if tag in ("ref", "callback"):
        _expect(type(data.get("id")) is int and data["id"] >= 0, f"bad {tag} id")
        return (Ref if tag == "ref" else Callback)(data["id"])
    if tag == "opaque":
        _expect(isinstance(data.get("type"), str) and isinstance(data.get("repr"), str), "bad opaque value")
        return Opaque(data["type"], _short(data["repr"]))
    raise WireError(f"unknown tag {tag!r}")


def _tensor(data: dict) -> torch.Tensor:
    dtype, shape, raw = _torch_dtype(data.get("dtype")), _shape(data.get("shape")), _bytes(data.get("data"))
    itemsize = torch.empty((), dtype=dtype).element_size()
    _expect(len(raw) == math.prod(shape) * itemsize, "tensor byte count does not match its shape")
    flat = torch.frombuffer(bytearray(raw), dtype=torch.uint8) if raw else torch.empty(0, dtype=torch.uint8)
    return flat.view(dtype).reshape(shape).clone()


def _ndarray(data: dict) -> np.ndarray:
    _expect(isinstance(data.get("dtype"), str), "bad ndarray dtype")
    dtype, shape, raw = np.dtype(data["dtype"]), _shape(data.get("shape")), _bytes(data.get("data"))
    _expect(not dtype.hasobject and len(raw) == math.prod(shape) * dtype.itemsize, "bad ndarray payload")
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


def _npscalar(data: dict) -> Any:
    _expect(isinstance(data.get("dtype"), str), "bad numpy scalar")
    dtype = np.dtype(data["dtype"])
    _expect(not dtype.hasobject, "object scalar")
    return np.frombuffer(_bytes(data.get("data")), dtype=dtype)[0]


def _npdtype(data: dict) -> np.dtype:
    _expect(isinstance(data.get("name"), str), "bad numpy dtype")
    return np.dtype(data["name"])


_ARRAYS = {"tensor": _tensor, "ndarray": _ndarray, "npscalar": _npscalar, "npdtype": _npdtype}


def _hashable(key: Any) -> Any:
    try:
        hash(key)
    except TypeError as exc:
        raise WireError(f"unhashable dict key {key!r}") from exc
    return key


# Framing: a 4-byte big-endian length, then the payload: the JSON's length (4 bytes), the JSON (an object
# with "v", the version, and "$type"), the number of byte payloads (4 bytes), each one's length (8 bytes),
# then the payloads themselves. In the JSON, the "data" of a value that carries bytes is the number of its
# payload.

_BYTE_TAGS = frozenset({"bytes", "tensor", "ndarray", "npscalar"})


def frame(message: dict) -> bytes:
    """One frame of ``message`` (its values encoded): strict JSON (no NaN), its byte payloads after it."""
    payloads: list[bytes] = []

    def payload(value: Any) -> int:
        if type(value) is not bytes:
            raise TypeError(f"{type(value).__name__} cannot cross the wire")
        payloads.append(value)
        return len(payloads) - 1

    text = json.dumps({"v": VERSION, **message}, separators=(",", ":"), allow_nan=False, default=payload).encode()
    sizes = struct.pack(f"<I{len(payloads)}Q", len(payloads), *map(len, payloads))
    body = b"".join([len(text).to_bytes(4, "big"), text, sizes, *payloads])
    return len(body).to_bytes(4, "big") + body


def write_frame(stream: BinaryIO, message: dict) -> None:
    """Send one frame on ``stream`` (the worker's answer pipe, or the judge's deadline-bound request pipe)."""
    stream.write(frame(message))
    stream.flush()


def read_frame(stream: BinaryIO) -> dict | None:
    """The next frame from ``stream`` (parsed strictly), or None where the stream ends first."""
    header = _read_exact(stream, 4)
    payload = None if header is None else _read_exact(stream, frame_length(header))
    return None if payload is None else parse_frame(payload)


def _read_exact(stream: BinaryIO, size: int) -> bytes | None:
    """``size`` bytes from ``stream``, however many reads they take; None at its end."""
    chunks, remaining = [], size
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def parse_frame(payload: bytes) -> dict:
    """Parse one frame's payload (the judge side: strict about version, shape and byte payloads)."""
    view = memoryview(payload)
    _expect(len(view) >= 8, "truncated frame")
    end = 4 + int.from_bytes(view[:4], "big")
    _expect(end + 4 <= len(view), "frame shorter than its JSON")
    count = int.from_bytes(view[end:end + 4], "little")
    _expect(count <= (len(view) - end - 4) // 8, "frame shorter than its byte payloads' lengths")
    start = end + 4 + 8 * count
    payloads = []
    for size in struct.unpack_from(f"<{count}Q", view, end + 4):
        _expect(start + size <= len(view), "frame shorter than its byte payloads")
        payloads.append(view[start:start + size])
        start += size
    _expect(start == len(view), "bytes after a frame's payloads")
    try:
        message = json.loads(str(view[4:end], "utf-8"), object_hook=_payloads_in(payloads) if payloads else None)
    except (ValueError, RecursionError) as exc:
        raise WireError(f"frame is not JSON: {exc}") from exc
    _expect(type(message) is dict, "frame is not an object")
    _expect(message.get("v") == VERSION, f"wire version {message.get('v')!r}, expected {VERSION}")
    _expect(isinstance(message.get("$type"), str), "frame without $type")
    return message


def _payloads_in(payloads: list[memoryview]) -> Any:
    """A ``json.loads`` object hook that puts each byte payload in place of its number."""
    def place(value: dict) -> dict:
        if value.get("$t") in _BYTE_TAGS and "data" in value:
            number = value["data"]
            _expect(type(number) is int and 0 <= number < len(payloads), f"bad byte payload number {number!r}")
            value["data"] = payloads[number]
        return value
    return place


def crossed(message: dict) -> dict:
    """``message`` as the other side reads it: framed and parsed (for a backend without pipes)."""
    return parse_frame(frame(message)[4:])


def frame_length(header: bytes) -> int:
    _expect(len(header) == 4, "truncated frame header")
    length = int.from_bytes(header, "big")
    _expect(length <= MAX_FRAME, f"frame of {length} bytes is over the {MAX_FRAME} byte limit")
    return length
