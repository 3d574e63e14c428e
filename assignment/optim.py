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
        raise NotImplementedError("optim.SGD is not implemented yet: see handout.md, section 'optim.SGD'")

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; return ``closure()``'s value (None without one).

        ``closure`` (optional) re-evaluates the model and returns the loss; it is called first,
        with gradients enabled (this method itself runs under ``torch.no_grad()``).
        """
        raise NotImplementedError("optim.SGD is not implemented yet: see handout.md, section 'optim.SGD'")


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
        raise NotImplementedError("optim.AdaGrad is not implemented yet: see handout.md, section 'optim.AdaGrad'")

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; return ``closure()``'s value (None without one).

        ``closure`` (optional) re-evaluates the model and returns the loss; it is called first,
        with gradients enabled (this method itself runs under ``torch.no_grad()``). Extra state
        keys (``torch.optim.Adagrad`` also keeps a ``"step"`` count) are left alone.
        """
        raise NotImplementedError("optim.AdaGrad is not implemented yet: see handout.md, section 'optim.AdaGrad'")
