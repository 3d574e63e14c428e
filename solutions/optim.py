"""P5: SGD and AdaGrad from scratch, as subclasses of ``torch.optim.Optimizer``.

An optimizer owns ``param_groups`` (a list of dicts: the group's ``"params"`` plus its
hyperparameters, filled from ``defaults`` where a group does not set them) and ``state`` (a
dict from each parameter to its own tensors: a momentum buffer, a sum of squared gradients).
The base class provides ``zero_grad``, ``state_dict`` and ``load_state_dict`` on top of those
two structures, so an optimizer that keeps all of its per-parameter memory in
``self.state[p]`` gets checkpointing for free.

Both optimizers follow PyTorch's update rules exactly (the same trajectory as
``torch.optim.SGD`` with dampening 0 and no Nesterov, and as ``torch.optim.Adagrad`` with
lr_decay 0); the element-wise arithmetic is written out here, without ``torch.optim``'s own
optimizers or ``torch._foreach_*`` kernels.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

Params = Iterable[torch.Tensor] | Iterable[dict[str, Any]]

# BEGIN SOLUTION
def _check_non_negative(**values: float) -> None:
    """ValueError for any hyperparameter below zero (as torch.optim does: 'Invalid lr: -1')."""
    for name, value in values.items():
        if not 0.0 <= value:  # also refuses NaN
            raise ValueError(f"Invalid {name} value: {value} (must be >= 0)")
# END SOLUTION


class SGD(torch.optim.Optimizer):
    """Stochastic gradient descent with optional momentum and (L2) weight decay.

    For every parameter ``p`` whose ``p.grad`` is not None, with its group's ``lr``,
    ``momentum`` and ``weight_decay``::

        g = p.grad + weight_decay * p
        if momentum > 0:
            buf = g (a copy)               on the parameter's first step
            buf = momentum * buf + g       afterwards
            g = buf                        buf is kept in self.state[p]["momentum_buffer"]
        p -= lr * g

    the same trajectory as ``torch.optim.SGD(params, lr, momentum, weight_decay=...)``
    (dampening 0, no Nesterov). Parameters whose ``.grad`` is None are skipped (their momentum
    buffer is left as it is, and no ``self.state`` entry is made for them). With momentum 0 no buffer is created (plain SGD keeps no state). Each param group may set its own ``lr``, ``momentum`` and
    ``weight_decay``; the arguments here are the defaults for groups that do not.

    Raises:
        ValueError: a negative ``lr``, ``momentum`` or ``weight_decay`` given to the constructor
            (zero is accepted; NaN is not graded). Only these are checked, as in torch.optim: a value a param group sets
            itself is used as it is (so the caller gives non-negative ones). [P5.sgd-raises]
    """

    def __init__(self, params: Params, lr: float = 1e-3, momentum: float = 0.0, weight_decay: float = 0.0) -> None:
        # BEGIN SOLUTION
        _check_non_negative(lr=lr, momentum=momentum, weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay))
        # END SOLUTION

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; return ``closure()``'s value (None without one).

        ``closure`` (optional) re-evaluates the model and returns the loss; it is called first,
        with gradients enabled (this method itself runs under ``torch.no_grad()``).
        """
        # BEGIN SOLUTION
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, momentum, weight_decay = group["lr"], group["momentum"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                if weight_decay != 0:
                    g = g.add(p, alpha=weight_decay)  # a new tensor: p.grad itself is not changed
                if momentum != 0:
                    state = self.state[p]
                    buf = state.get("momentum_buffer")
                    if buf is None:
                        # The first step starts the running sum at g itself (torch's rule with
                        # dampening 0), not at (1 - momentum) * g. Clone: the buffer must not
                        # share memory with p.grad, which the next backward accumulates into.
                        buf = state["momentum_buffer"] = g.clone()
                    else:
                        buf.mul_(momentum).add_(g)
                    g = buf
                p.add_(g, alpha=-lr)
        return loss
        # END SOLUTION


class AdaGrad(torch.optim.Optimizer):
    """AdaGrad: per-coordinate step sizes that shrink with the gradients seen so far.

    For every parameter ``p`` whose ``p.grad`` is not None, with its group's ``lr``, ``eps``
    and ``weight_decay``::

        g = p.grad + weight_decay * p
        sum += g * g                          kept in self.state[p]["sum"]
        p -= lr * g / (sqrt(sum) + eps)

    the same trajectory as ``torch.optim.Adagrad(params, lr, lr_decay=0, weight_decay,
    initial_accumulator_value, eps)``. ``eps`` is added outside the square root, as in PyTorch
    (the lecture writes ``sqrt(g2 + 1e-5)``; see the handout). Every parameter's ``"sum"``
    starts at ``initial_accumulator_value`` (created here, in the constructor, for every group,
    as PyTorch does). Parameters whose ``.grad`` is None are skipped. Each param group may set
    its own ``lr``, ``eps`` and ``weight_decay``.

    Raises:
        ValueError: a negative ``lr``, ``eps``, ``initial_accumulator_value`` or ``weight_decay`` given
            to the constructor (zero is accepted; NaN is not graded). Only these are checked, as in torch.optim: a value a
            param group sets itself is used as it is (so the caller gives non-negative ones). [P5.adagrad-raises]
    """

    def __init__(self, params: Params, lr: float = 1e-2, eps: float = 1e-10, initial_accumulator_value: float = 0.0,
                 weight_decay: float = 0.0) -> None:
        # BEGIN SOLUTION
        _check_non_negative(lr=lr, eps=eps, initial_accumulator_value=initial_accumulator_value,
                            weight_decay=weight_decay)
        super().__init__(params, dict(lr=lr, eps=eps, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value))
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["sum"] = torch.full_like(p, initial_accumulator_value,
                                                       memory_format=torch.preserve_format)
        # END SOLUTION

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; return ``closure()``'s value (None without one).

        ``closure`` (optional) re-evaluates the model and returns the loss; it is called first,
        with gradients enabled (this method itself runs under ``torch.no_grad()``). Extra state
        keys (``torch.optim.Adagrad`` also keeps a ``"step"`` count) are left alone.
        """
        # BEGIN SOLUTION
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            lr, eps, weight_decay = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                if weight_decay != 0:
                    g = g.add(p, alpha=weight_decay)
                total = self.state[p]["sum"]
                total.addcmul_(g, g)  # sum += g * g, in place: the state dict sees it
                # eps outside the root: a coordinate whose gradients were all zero gets
                # g / eps = 0 / eps = 0, and early steps are about lr * sign(g).
                p.addcdiv_(g, total.sqrt().add_(eps), value=-lr)
        return loss
        # END SOLUTION
