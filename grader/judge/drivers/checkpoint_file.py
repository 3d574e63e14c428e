"""P7: a checkpoint file as the judge reads it, and what it holds, found by content.

The file's layout is the submission's choice (names, nesting, containers). The judge loads the
bytes it took from the exchange folder (or from a buffer the worker returned) with
``torch.load(weights_only=True)`` in its own process, and looks for each part of the state it
computed itself anywhere in the loaded object, under any key, at any depth:

- a state dict: a dict with exactly its keys, tensors of the same dtype, shape and bytes;
- the iteration: an int, a whole float or a one-element tensor of that value;
- an RNG state: a tensor, list, tuple or bytes of exactly its numbers (modulo 2**32, so uint32
  words kept in int32 or int64 tensors count): torch's 5056 state bytes, numpy's 624 MT19937
  keys, the 625 words of Python's ``random.getstate()[1]``;
- the extras: a dict holding every extra under its own name with an equal value.
"""

from __future__ import annotations

import io
import pickle
import re
import zipfile
from typing import Any, Iterator

import torch

from .answers import same

CHECKPOINT_BYTES = 1 << 20  # the runs P7 saves take under 20 kB
MAX_NODES = 200_000  # values visited in one loaded object (a pickle may share a list many times over)
WORD = 1 << 32


class Unreadable(Exception):
    """The bytes are not a checkpoint ``torch.load(weights_only=True)`` reads; the message says why."""


def load(data: bytes) -> Any:
    """What ``torch.load(..., weights_only=True)`` rebuilds from ``data``, in the judge.

    torch.save stores its zip records uncompressed: a compressed record (which could inflate to
    gigabytes in the judge) is refused before torch reads anything."""
    if len(data) > CHECKPOINT_BYTES:
        raise Unreadable(f"it holds more than {CHECKPOINT_BYTES} bytes")
    try:
        if zipfile.is_zipfile(io.BytesIO(data)):
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                records = archive.infolist()
            if any(r.compress_type != zipfile.ZIP_STORED or r.file_size != r.compress_size for r in records):
                raise Unreadable("its zip records are compressed, which torch.save never does")
        return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Unreadable:
        raise
    except pickle.UnpicklingError as exc:
        raise Unreadable(refused(str(exc))) from None
    except Exception as exc:  # noqa: BLE001 - whatever the bytes make torch raise, they are no checkpoint
        raise Unreadable(f"torch.load(..., weights_only=True) raised {type(exc).__name__}: {exc}"[:300]) from None


def refused(message: str) -> str:
    """torch's refusal of a checkpoint (an UnpicklingError's ``message``), as the rule the save broke: what
    torch would not rebuild, without torch's advice on loading it anyway."""
    found = re.search(r"GLOBAL ([\w.]+)", message)
    culprit = found.group(1) if found else "an object it does not rebuild"
    if culprit.startswith("numpy"):
        culprit += " (a numpy array or scalar: np.random.get_state() holds one)"
    return (f"torch.load(..., weights_only=True) refuses {culprit}: the file save_checkpoint writes must hold only "
            "tensors, Python scalars, str, None and lists, tuples and dicts of them, numpy's RNG state as plain "
            "values [P7.loads-safely]")


def values(content: Any) -> Iterator[Any]:
    """``content`` and every value inside it (dict values, list and tuple items), each container once."""
    stack, seen, visited = [content], set(), 0
    while stack and visited < MAX_NODES:
        value = stack.pop()
        visited += 1
        yield value
        if isinstance(value, (dict, list, tuple)) and id(value) not in seen:
            seen.add(id(value))
            stack.extend(value.values() if isinstance(value, dict) else value)


def words(value: Any, count: int) -> list[int] | None:
    """``value`` as ``count`` integers modulo 2**32, if it is a tensor, list, tuple or bytes of them."""
    if isinstance(value, torch.Tensor):
        if value.numel() != count or value.is_floating_point() or value.is_complex() or value.dtype == torch.bool:
            return None
        try:
            items = value.reshape(-1).tolist()
        except (RuntimeError, NotImplementedError):  # a tensor with no plain values (sparse, quantized...)
            return None
    elif isinstance(value, (list, tuple, bytes)) and len(value) == count:
        items = list(value)
    else:
        return None
    if not all(type(item) is int for item in items):
        return None
    return [item % WORD for item in items]


def holds_words(content: Any, want: list[int]) -> bool:
    target = [item % WORD for item in want]
    return any(words(value, len(target)) == target for value in values(content))


def holds_iteration(content: Any, iteration: int) -> bool:
    for value in values(content):
        if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.dtype == torch.bool:
            value = value.item()
        if type(value) in (int, float) and value == iteration:
            return True
    return False


def holds_extras(content: Any, extras: dict[str, Any]) -> bool:
    return any(isinstance(value, dict) and all(name in value and same(item, value[name], any_container=True)
                                               for name, item in extras.items())
               for value in values(content))


def missing(content: Any, model: dict | None = None, optimizer: dict | None = None, iteration: int | None = None,
            rng: tuple | None = None, extras: dict | None = None) -> list[str]:
    """What of the state the judge expects (the arguments given) ``content`` does not hold."""
    absent = []
    if model is not None and not any(same(model, value, any_container=True) for value in values(content)):
        absent.append("the model's state_dict()")
    if optimizer is not None and not any(same(optimizer, value, any_container=True) for value in values(content)):
        absent.append("the optimizer's state_dict()")
    if iteration is not None and not holds_iteration(content, iteration):
        absent.append(f"the iteration {iteration}")
    if rng is not None:
        torch_state, numpy_state, python_state = rng
        for name, want in (("torch.get_rng_state()", torch_state.tolist()),
                           ("numpy's 624 MT19937 keys (np.random.get_state()[1])", numpy_state[1].tolist()),
                           ("the 625 words of random.getstate()[1]", list(python_state[1]))):
            if not holds_words(content, want):
                absent.append(name)
    if extras and not holds_extras(content, extras):
        absent.append(f"the extras {sorted(extras)} (a dict holding each under its name)")
    return absent


def differing(want: dict, got: object) -> list[str]:
    """Names of the entries of a state dict that are missing or not bit-identical."""
    if not isinstance(got, dict):
        return ["<not a dict>"]
    return sorted(str(k) for k in set(want) | set(got) if k not in got or k not in want or not same(want[k], got[k]))


def check(data: bytes, **expected: Any) -> str:
    """Why ``data`` is not a checkpoint holding ``expected`` (see ``missing``); "" when it is."""
    try:
        content = load(data)
    except Unreadable as exc:
        return f"the judge cannot read it as a checkpoint: {exc}"
    absent = missing(content, **expected)
    return f"it holds no {', no '.join(absent)}" if absent else ""
