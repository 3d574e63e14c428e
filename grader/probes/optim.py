"""Probes for P5 (optim.py): drive an optimizer over a fixed problem and return plain data.

``run`` is used by both sides of a hidden test: the worker runs it on the submission's classes
(``module.SGD`` / ``module.AdaGrad``), the judge runs the very same function on ``torch.optim``
(through a namespace whose ``SGD`` and ``AdaGrad`` build ``torch.optim.SGD`` / ``Adagrad``), so
the two trajectories come from identical parameters, data and call sequences.

The problem: parameters of the given shapes drawn from a seeded CPU generator, and a smooth
non-quadratic loss per parameter, ``sum(c * (p - t)**2) + 0.1 * sum(sin(3 p))``, whose gradient
``2 c (p - t) + 0.3 cos(3 p)`` depends on where the trajectory is (so an error at one step shows
in every later one) and stays bounded (so no trajectory blows up for the learning rates drawn).
"""

from __future__ import annotations

import io
from typing import Any

import torch


def _problem(shapes: list, seed: int, device: str) -> tuple[list[torch.Tensor], list[torch.Tensor], list[torch.Tensor]]:
    generator = torch.Generator().manual_seed(seed)
    params, targets, scales = [], [], []
    for shape in shapes:
        shape = tuple(shape)
        params.append(torch.randn(shape, generator=generator).to(device).requires_grad_())
        targets.append(torch.randn(shape, generator=generator).to(device))
        scales.append((0.5 + torch.rand(shape, generator=generator)).to(device))
    return params, targets, scales


def _state_of(optimizer: Any, params: list[torch.Tensor]) -> list[dict]:
    """Per parameter: its state entries (tensors on the CPU; other values as ints/floats or their repr)."""
    out = []
    for p in params:
        entries = {}
        for key, value in dict(getattr(optimizer, "state", {}).get(p, {})).items():
            if isinstance(value, torch.Tensor):
                entries[str(key)] = value.detach().to("cpu").clone()
            elif type(value) in (int, float, bool) or value is None:
                entries[str(key)] = value
            else:
                entries[str(key)] = repr(value)[:80]
        out.append(entries)
    return out


def run(module: Any, *, kind: str, shapes: list, hyper: dict, steps: int, groups: list | None = None,
        seed: int = 0, device: str = "cpu", no_grad: list | None = None, set_to_none: bool = True,
        closure: bool = False, init: list | None = None, load: bytes | None = None, save: bool = False) -> dict:
    """Build ``module.<kind>`` over the problem's parameters, run ``steps`` steps, report.

    groups: None (one plain list of parameters) or a list of dicts ``{"params": [indices], **overrides}``.
    no_grad: per step, the parameter indices whose ``.grad`` is set to None before ``step``.
    init: parameter values to start from (a resumed run); load: bytes of a saved state dict to
    load (``torch.load(weights_only=True)``) before the first step; save: return the state dict's bytes.
    Returns ``{"params": [one (steps + 1, *shape) tensor per parameter], "returned": [step's
    return value per step, as a float or None], "losses": [the closure's loss per step],
    "state": [per-parameter state after the last step], "is_optimizer": bool, "saved": bytes | None}``.
    """
    params, targets, scales = _problem(shapes, seed, device)
    if init is not None:
        with torch.no_grad():
            for p, value in zip(params, init):
                p.copy_(value.to(device))
    if groups is None:
        spec: Any = params
    else:
        spec = [{**{k: v for k, v in group.items() if k != "params"}, "params": [params[i] for i in group["params"]]}
                for group in groups]
    optimizer = getattr(module, kind)(spec, **hyper)
    if load is not None:
        optimizer.load_state_dict(torch.load(io.BytesIO(load), weights_only=True))

    def compute_gradients(step: int) -> torch.Tensor:
        # No enable_grad here: a closure runs in whatever mode step() calls it in, as a user's would.
        optimizer.zero_grad(set_to_none=set_to_none)
        loss = sum((c * (p - t) ** 2).sum() + 0.1 * torch.sin(3 * p).sum() for p, t, c in zip(params, targets, scales))
        loss.backward()
        for index in (no_grad[step] if no_grad else []):
            params[index].grad = None
        return loss.detach()

    history = [[p.detach().to("cpu").clone()] for p in params]
    returned, losses = [], []
    for step in range(steps):
        if closure:
            seen: list[torch.Tensor] = []

            def the_closure(step: int = step) -> torch.Tensor:
                seen.append(compute_gradients(step))
                return seen[-1]

            value = optimizer.step(the_closure)
            losses.append(float(seen[-1]) if seen else None)
        else:
            compute_gradients(step)
            value = optimizer.step()
        returned.append(float(value) if isinstance(value, (torch.Tensor, float, int)) else None if value is None
                        else repr(value)[:80])
        for trace, p in zip(history, params):
            trace.append(p.detach().to("cpu").clone())
    saved = None
    if save:
        buffer = io.BytesIO()
        torch.save(optimizer.state_dict(), buffer)
        saved = buffer.getvalue()
    return {"params": [torch.stack(trace) for trace in history], "returned": returned, "losses": losses,
            "state": _state_of(optimizer, params), "is_optimizer": isinstance(optimizer, torch.optim.Optimizer),
            "saved": saved}
