"""Probes for P8 (amp.py): drive train_step / train / checkpointed and report what happened.

The judge sends the initial weights and the data; the probe builds the model, optimizer and
scaler, records what autocast produced (forward hooks on the Linear layers) and returns the
results, the parameters afterwards and the gradients' state. The judge computes the expected
values itself with PyTorch.
"""

from __future__ import annotations

import time
from types import ModuleType
from typing import Any

import torch
import torch.nn.functional as F


def build_model(state: dict[str, torch.Tensor], device: str = "cpu") -> torch.nn.Sequential:
    """Linear(d_in, width) -> GELU -> Linear(width, d_out), with the given weights."""
    width, d_in = state["0.weight"].shape
    d_out = state["2.weight"].shape[0]
    model = torch.nn.Sequential(torch.nn.Linear(d_in, width), torch.nn.GELU(), torch.nn.Linear(width, d_out))
    model.load_state_dict(state)
    return model.to(device)


def build_blocks(state: dict[str, torch.Tensor], depth: int, dropout: float = 0.0,
                 device: str = "cpu") -> torch.nn.ModuleList:
    """``depth`` residual-free MLP blocks Linear(w, 2w) -> GELU -> Dropout -> Linear(2w, w)."""
    width = state["0.0.weight"].shape[1]
    blocks = torch.nn.ModuleList(
        torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(), torch.nn.Dropout(dropout),
                            torch.nn.Linear(2 * width, width)) for _ in range(depth))
    blocks.load_state_dict(state)
    return blocks.to(device)


def _cpu_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: p.detach().cpu().clone() for name, p in module.named_parameters()}


def train_steps(amp: ModuleType, state: dict, x: torch.Tensor, y: torch.Tensor, precision: str = "fp32",
                scaler: dict | None = None, max_grad_norm: float | None = None, lr: float = 0.1,
                inject: list[str | None] | None = None, device: str = "cpu") -> dict:
    """Call ``amp.train_step`` once per entry of ``inject`` (None: a normal step; "inf"/"nan": the
    first layer's weight gradient is replaced by inf/NaN during backward) on an SGD optimizer.

    ``scaler`` holds GradScaler keyword arguments (None: no scaler). Returns each step's result,
    the dtypes the Linear layers produced in each forward, whether autocast was on while the loss
    was computed, the parameters (and their dtypes) afterwards, which gradients are None, and the
    scaler's scale after each step.
    """
    model = build_model(state, device)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    grad_scaler = torch.amp.GradScaler(device, **scaler) if scaler is not None else None
    linear_dtypes: list[str] = []
    for module in model:
        if isinstance(module, torch.nn.Linear):
            module.register_forward_hook(lambda mod, inp, out: linear_dtypes.append(str(out.dtype)))
    autocast_in_loss: list[bool] = []

    def loss_fn(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        autocast_in_loss.append(torch.is_autocast_enabled(prediction.device.type))
        return F.mse_loss(prediction, target)

    poison: dict[str, str | None] = {"kind": None}

    def corrupt(grad: torch.Tensor) -> torch.Tensor:
        if poison["kind"] is None:
            return grad
        return torch.full_like(grad, float(poison["kind"]))

    model[0].weight.register_hook(corrupt)
    results, scales, dtypes_per_step = [], [], []
    batch = (x.to(device), y.to(device))
    for kind in inject or [None]:
        poison["kind"] = kind
        before = len(linear_dtypes)
        results.append(amp.train_step(model, batch, loss_fn, optimizer, scaler=grad_scaler, precision=precision,
                                      max_grad_norm=max_grad_norm))
        dtypes_per_step.append(linear_dtypes[before:])
        scales.append(grad_scaler.get_scale() if grad_scaler is not None else None)
    return {"results": results, "linear_dtypes": dtypes_per_step, "autocast_in_loss": autocast_in_loss,
            "params": _cpu_state(model), "param_dtypes": sorted({str(p.dtype) for p in model.parameters()}),
            "grads_none": [p.grad is None for p in model.parameters()], "scales": scales}


def train_loop(amp: ModuleType, state: dict, batches: list, steps: Any, lr: float = 0.05,
               precision: str = "fp32") -> dict:
    """``amp.train`` over ``batches`` (get_batch hands them out in order) with SGD; returns the
    losses (or the exception), how often get_batch was called, and the parameters afterwards."""
    model = build_model(state)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    calls = {"n": 0}

    def get_batch():
        batch = batches[calls["n"] % len(batches)]
        calls["n"] += 1
        return batch

    try:
        losses: Any = amp.train(model, get_batch, F.mse_loss, optimizer, steps, precision=precision)
    except Exception as exc:  # noqa: BLE001 - the student's exception is the answer
        losses = exc
    return {"losses": losses, "calls": calls["n"], "params": _cpu_state(model),
            "grads_none": [p.grad is None for p in model.parameters()]}


def checkpointed_run(amp: ModuleType, state: dict, depth: int, x: torch.Tensor, input_grad: bool,
                     enabled: bool = True, dropout: float = 0.0, seed: int = 0) -> dict:
    """``amp.checkpointed(blocks, x, enabled)`` under ``torch.manual_seed(seed)``, then backward of
    ``(out ** 2).sum()``: returns the output, the parameter gradients and x's gradient."""
    blocks = build_blocks(state, depth, dropout)
    x = x.clone().requires_grad_(input_grad)
    torch.manual_seed(seed)
    out = amp.checkpointed(blocks, x, enabled=enabled)
    report: dict[str, Any] = {"out": out.detach().clone(), "requires_grad": out.requires_grad}
    if out.requires_grad:
        out.square().sum().backward()
    report["grads"] = {name: (None if p.grad is None else p.grad.clone()) for name, p in blocks.named_parameters()}
    report["x_grad"] = None if x.grad is None else x.grad.clone()
    return report


def saved_bytes(amp: ModuleType, state: dict, depth: int, x: torch.Tensor, enabled: bool) -> dict:
    """Bytes autograd keeps for backward during ``amp.checkpointed(blocks, x, enabled)``, counted
    with saved_tensors_hooks (each storage once, parameters excluded)."""
    blocks = build_blocks(state, depth)
    params = {p.untyped_storage().data_ptr() for p in blocks.parameters()}
    kept: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in params:
            kept[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = amp.checkpointed(blocks, x, enabled=enabled)
    out.square().mean().backward()
    return {"bytes": sum(kept.values()), "grads": sum(p.grad is not None for p in blocks.parameters()),
            "params": len(list(blocks.parameters()))}


def cuda_peak_memory(amp: ModuleType, depth: int = 16, width: int = 512, batch: int = 8192) -> dict:
    """Peak CUDA memory of forward + backward: a plain loop (the grader's) and amp.checkpointed."""
    torch.manual_seed(0)
    blocks = build_blocks(build_blocks_state(depth, width), depth, device="cuda")
    x = torch.randn(batch, width, device="cuda")

    def plain(b, v):
        for block in b:
            v = block(v)
        return v

    def peak(forward) -> int:
        for _ in range(2):  # the first run warms up kernels and the caching allocator
            blocks.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            forward(blocks, x).square().mean().backward()
            torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated()

    plain_peak = peak(plain)
    student_peak = peak(lambda b, v: amp.checkpointed(b, v))
    grads = sum(p.grad is not None for p in blocks.parameters())
    return {"plain": plain_peak, "checkpointed": student_peak, "grads": grads,
            "params": len(list(blocks.parameters()))}


def build_blocks_state(depth: int, width: int) -> dict[str, torch.Tensor]:
    return torch.nn.ModuleList(
        torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(), torch.nn.Dropout(0.0),
                            torch.nn.Linear(2 * width, width)) for _ in range(depth)).state_dict()


def cuda_speed(amp: ModuleType, dim: int = 4096, layers: int = 4, steps: int = 10) -> dict:
    """Seconds for ``steps`` steps of amp.train in fp32 and bf16 on a matmul-heavy CUDA model
    (TF32 off, so fp32 means fp32), and the dtype the Linear layers produced under bf16."""
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        x, y = torch.randn(dim, dim, device="cuda"), torch.randn(dim, dim, device="cuda")
        seconds, dtypes = {}, {}
        for precision in ("fp32", "bf16"):
            torch.manual_seed(0)
            model = torch.nn.Sequential(*[torch.nn.Linear(dim, dim, bias=False) for _ in range(layers)]).cuda()
            optimizer = torch.optim.SGD(model.parameters(), lr=1e-4)
            seen: list[str] = []
            model[0].register_forward_hook(lambda mod, inp, out: seen.append(str(out.dtype)))
            amp.train(model, lambda: (x, y), F.mse_loss, optimizer, 2, precision=precision)  # warm-up
            torch.cuda.synchronize()
            start = time.perf_counter()
            amp.train(model, lambda: (x, y), F.mse_loss, optimizer, steps, precision=precision)
            torch.cuda.synchronize()
            seconds[precision] = time.perf_counter() - start
            dtypes[precision] = seen[-1] if seen else None
        return {"seconds": seconds, "dtypes": dtypes}
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous


def train_step_error(amp: ModuleType, state: dict, x: torch.Tensor, y: torch.Tensor, **kwargs: Any) -> dict:
    """``amp.train_step`` with arguments it should refuse: returns the exception (or "returned"),
    and whether the parameters changed."""
    model = build_model(state)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    if kwargs.pop("cpu_scaler", False):
        kwargs["scaler"] = torch.amp.GradScaler("cpu")
    try:
        amp.train_step(model, (x, y), F.mse_loss, optimizer, **kwargs)
    except Exception as exc:  # noqa: BLE001 - the student's exception is the answer
        outcome: Any = exc
    else:
        outcome = "returned"
    changed = any(not torch.equal(p.detach(), state[name]) for name, p in model.named_parameters())
    return {"outcome": outcome, "changed": changed}
