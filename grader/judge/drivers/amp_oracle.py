"""P8's oracles: what PyTorch itself gives for each run the hidden suite orders, computed in the judge.

The same model built from the same weights (``drivers/amp.py``'s recipes), the loss computed by
hand (under ``torch.autocast("cpu", dtype)`` for bf16/fp16), ``torch.nn.utils.clip_grad_norm_``
for the pre-clip norm and the clipped gradients, a plain SGD update, a local
``torch.amp.GradScaler`` for what an inf/NaN gradient does to the scale, a plain loop measured with
``saved_tensors_hooks`` for activation memory, and, on a GPU, plain loops timed and measured in the
judge process; and the inputs the suite draws. Nothing here reaches the worker.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from . import amp as drive
from .sides import JUDGE

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
VISIBLE_OFFSET = 256.0  # bf16 spaces numbers near 256 by 2, fp16 by 0.25: a cast moves them visibly
# Tolerances. The worker and the oracle run the same PyTorch ops on the same CPU, so fp32 results
# agree to rounding: the loss and norm within 1e-5 relative. Gradient scaling by a power of two is
# exact, so the unscaled gradients match too. An SGD step p - lr*g may differ from torch's fused
# p.add_(g, alpha=-lr) by an ulp: 1e-6 absolute on parameters of size ~1.
# Under bf16/fp16 autocast an output rounded to 8 (or 11) significant bits can round the other way if the
# worker's CPU kernels accumulate in another order (other thread counts): 2e-2 covers that.
RTOL = 1e-5
RTOL_16 = 2e-2
ATOL_PARAMS = 1e-6


def setups() -> st.SearchStrategy[tuple]:
    """(seed, width, batch size): small models and batches."""
    return st.tuples(st.integers(0, 10**6), st.integers(1, 32), st.integers(1, 16))


def scalers() -> st.SearchStrategy[dict | None]:
    """No scaler, or a CPU GradScaler with a power-of-two initial scale."""
    return st.none() | st.builds(lambda k: {"init_scale": 2.0**k}, st.integers(0, 24))


def model_state(seed: int, width: int, d_in: int = 8, d_out: int = 4) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"0.weight": torch.randn(width, d_in, generator=g) / math.sqrt(d_in),
            "0.bias": 0.1 * torch.randn(width, generator=g),
            "2.weight": torch.randn(d_out, width, generator=g) / math.sqrt(width),
            "2.bias": 0.1 * torch.randn(d_out, generator=g)}


def batch(seed: int, n: int, d_in: int = 8, d_out: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(10_000 + seed)
    return torch.randn(n, d_in, generator=g), torch.randn(n, d_out, generator=g)


def oracle_model(state: dict[str, torch.Tensor]) -> torch.nn.Sequential:
    width, d_in = state["0.weight"].shape
    model = drive.sequential(JUDGE, drive.mlp(d_in, width, state["2.weight"].shape[0]))[0].obj
    model.load_state_dict(state)
    return model


def dot_loss(prediction: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The Trainer's "dot" loss: a matmul, so autocast runs it in 16 bits."""
    return torch.einsum("ij,ij->", prediction, y)


def oracle_step(state, x, y, precision: str = "fp32", max_grad_norm: float | None = None, lr: float = 0.1,
                loss_fn=F.mse_loss, optimized: str = "all"):
    """(loss, pre-clip norm or None, parameters after one SGD step), computed by hand; the SGD holds the
    parameters ``drive.OPTIMIZED[optimized]`` names: only those are clipped, measured and updated."""
    model = oracle_model(state)
    if precision == "fp32":
        loss = loss_fn(model(x), y)
    else:
        with torch.autocast("cpu", dtype=DTYPES[precision]):
            loss = loss_fn(model(x), y)
    loss.backward()
    held = drive.OPTIMIZED[optimized]
    norm = None
    if max_grad_norm is not None:
        norm = float(torch.nn.utils.clip_grad_norm_([p for name, p in model.named_parameters() if name in held],
                                                    max_grad_norm))
    after = {name: (p - lr * p.grad if name in held else p).detach() for name, p in model.named_parameters()}
    return loss.item(), norm, after


def oracle_run(state, batches: list, precision: str = "fp32", lr: float = 0.1) -> tuple[list[float], dict]:
    """The losses of one ``oracle_step`` per batch, in order, and the parameters after the last."""
    losses, params = [], state
    for x, y in batches:
        loss, _, params = oracle_step(params, x, y, precision, lr=lr)
        losses.append(loss)
    return losses, params


def close(got: float, want: float, rtol: float = RTOL) -> bool:
    return abs(got - want) <= rtol * abs(want) + 1e-12


def max_param_diff(got: dict, want: dict) -> float:
    return max((got[k].double() - want[k].double()).abs().max().item() for k in want)


def oracle_norm(state, x, y, precision: str = "fp32", optimized: str = "all") -> float:
    model = oracle_model(state)
    with torch.autocast("cpu", dtype=DTYPES[precision], enabled=precision != "fp32"):
        F.mse_loss(model(x), y).backward()
    held = drive.OPTIMIZED[optimized]
    return float(torch.nn.utils.get_total_norm([p.grad for name, p in model.named_parameters() if name in held]))


def visible_case(seed: int, width: int, n: int) -> tuple[dict[str, torch.Tensor], torch.Tensor, torch.Tensor]:
    """A model and a batch on which 16-bit rounding shows: x = 256 + noise loses up to 1 (bf16) or
    0.125 (fp16) in the cast, the first layer's rows are centred so that its float32 outputs stay
    near 1 however large x is, and y is the float32 model's own prediction. An fp32 step has loss 0
    and leaves the parameters where they are; a 16-bit step's loss is its rounding error (seen over
    widths 1-32 and batches 1-16: bf16 6e-4 to 0.8, fp16 3e-6 to 0.02) and moves them by 0.01 or more."""
    state = model_state(seed, width)
    state["0.weight"] = state["0.weight"] - state["0.weight"].mean(dim=1, keepdim=True)
    x = batch(seed, n)[0] + VISIBLE_OFFSET
    with torch.no_grad():
        y = oracle_model(state)(x)
    return state, x, y


def oracle_scale(init_scale: float, found_inf: list[bool], growth_interval: int = 2000) -> float:
    """A local CPU GradScaler's scale after steps whose gradients are (or are not) inf."""
    weight = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([weight], lr=0.1)
    scaler = torch.amp.GradScaler("cpu", init_scale=init_scale, growth_interval=growth_interval)
    for inf in found_inf:
        scaler.scale(weight.sum() * (math.inf if inf else 1.0)).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad()
    return scaler.get_scale()


def blocks_state(seed: int, depth: int, width: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    state = {}
    for i in range(depth):
        state[f"{i}.0.weight"] = torch.randn(2 * width, width, generator=g) / math.sqrt(width)
        state[f"{i}.0.bias"] = 0.1 * torch.randn(2 * width, generator=g)
        state[f"{i}.3.weight"] = torch.randn(width, 2 * width, generator=g) / math.sqrt(2 * width)
        state[f"{i}.3.bias"] = 0.1 * torch.randn(width, generator=g)
    return state


def plain_blocks_run(state: dict[str, torch.Tensor], recipe: drive.Recipe, depth: int, x: torch.Tensor,
                     input_grad: bool, seed: int) -> tuple[torch.nn.ModuleList, torch.Tensor, torch.Tensor]:
    """A plain loop over the blocks, then backward of the output's squares' sum, after
    ``torch.manual_seed(seed)`` (the dropout masks of a worker seeded the same way): the blocks,
    the input (a copy of ``x``, requiring grad or not) and the output."""
    blocks, x_oracle = drive.blocks(JUDGE, recipe, depth, state)[0].obj, x.clone().requires_grad_(input_grad)
    torch.manual_seed(seed)
    out = x_oracle
    for block in blocks:
        out = block(out)
    out.square().sum().backward()
    return blocks, x_oracle, out


def plain_saved_bytes(recipe: drive.Recipe, depth: int, state: dict[str, torch.Tensor], x: torch.Tensor) -> int:
    """Bytes a plain forward over ``depth`` blocks of ``recipe`` holding ``state`` keeps for
    backward (each storage once, parameters excluded)."""
    blocks = drive.blocks(JUDGE, recipe, depth, state)[0].obj

    def forward() -> torch.Tensor:
        out = x
        for block in blocks:
            out = block(out)
        return out

    return saved_bytes(blocks, forward)


@dataclass(frozen=True)
class CheckpointMemory:
    """The CPU measurement of what ``checkpointed`` keeps for backward (the hidden suite's, and P8's probe's):
    ``depth`` blocks of ``width`` holding ``state``, the input ``x``, what a plain forward keeps (``plain``,
    counted here) and the bound a checkpointed forward must stay under: one block input per block, plus slack
    for one block run plainly (checkpoint_sequential leaves its last segment un-checkpointed); and the floor it
    must reach: half a block input per block (one checkpoint around the whole stack keeps one block input)."""

    depth: int
    width: int
    state: dict[str, torch.Tensor]
    x: torch.Tensor
    plain: int
    block_input: int
    bound: int
    floor: int


MEASURABLE = 0.8  # a plain forward the judge drives must show this share of what it keeps, or memory is unmeasurable


@functools.cache
def checkpoint_memory(depth: int = 6, width: int = 16, rows: int = 32768) -> CheckpointMemory:
    state = blocks_state(0, depth, width)
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(1))
    plain = plain_saved_bytes(drive.block(width), depth, state, x)
    block_input = x.numel() * x.element_size()
    return CheckpointMemory(depth, width, state, x, plain, block_input, depth * block_input + plain // depth,
                            depth * block_input // 2)


def saved_bytes(module: torch.nn.Module, forward) -> int:
    """Bytes that ``forward()`` (a forward through ``module``, in this process) hands autograd to keep for
    backward, as saved_tensors_hooks see them (each storage once, ``module``'s parameters excluded; what a
    non-reentrant checkpoint keeps to itself is not seen: it recomputes it). The output's backward runs."""
    params = {p.untyped_storage().data_ptr() for p in module.parameters()}
    kept: dict[int, int] = {}

    def pack(tensor):
        if tensor.untyped_storage().data_ptr() not in params:
            kept[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        out = forward()
    if out.requires_grad:
        out.square().mean().backward()
    return sum(kept.values())


def judge_plain_cuda(depth: int, width: int, n: int) -> tuple[int, int]:
    """In the judge process, on its own GPU context: (bytes a plain forward's output keeps alive,
    peak allocated memory of forward + backward), after a warm-up run."""
    torch.manual_seed(0)
    blocks = drive.blocks(JUDGE, drive.block(width), depth, device="cuda")[0].obj
    x = torch.randn(n, width, device="cuda")
    for _ in range(2):  # the first run warms up kernels and the caching allocator
        blocks.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = x
        for module in blocks:
            out = module(out)
        held = torch.cuda.memory_allocated() - before
        out.square().mean().backward()
        del out
        torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del blocks, x
    torch.cuda.empty_cache()
    return held, peak


def judge_train_cuda(recipe, batches, steps: int, precision: str, lr: float) -> tuple[float, list[float], list[float]]:
    """In the judge process: seconds for ``steps`` plain training steps (autocast, backward, SGD step,
    zero_grad, the loss as a float) after two warm-up steps on the small batch, their losses, and the
    warm-up's losses."""
    torch.manual_seed(0)
    model = drive.sequential(JUDGE, recipe, device="cuda")[0].obj
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)

    def step(x, y) -> float:
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16"):
            loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.item()

    warm_up = [step(*batches["small"]) for _ in range(2)]
    torch.cuda.synchronize()
    start = time.perf_counter()
    losses = [step(*batches["large"]) for _ in range(steps)]
    torch.cuda.synchronize()
    return time.perf_counter() - start, losses, warm_up


def judge_bf16_reference(recipe: drive.Recipe, dim: int, steps: int, lr: float) -> tuple[dict, dict]:
    """The batches of the CUDA speed test (seeded: "large", ``dim`` rows; "small", 8 rows of
    x = 256 + noise with y the fp32 model's output) and ``judge_train_cuda`` for fp32 and bf16 on
    them, TF32 off (fp32 means fp32) and put back as it was."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    torch.manual_seed(1)
    batches = {size: (torch.randn(rows, dim, device="cuda"), torch.randn(rows, dim, device="cuda"))
               for size, rows in (("large", dim), ("small", 8))}
    try:
        torch.manual_seed(0)
        with torch.no_grad():
            x_small = batches["small"][0] + VISIBLE_OFFSET
            batches["small"] = (x_small, drive.sequential(JUDGE, recipe, device="cuda")[0].obj(x_small))
        reference = {p: judge_train_cuda(recipe, batches, steps, p, lr) for p in ("fp32", "bf16")}
    finally:
        torch.set_float32_matmul_precision(previous)
    return batches, reference
