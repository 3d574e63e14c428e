"""Judge-side driving of P8 (amp.py): models, optimizers and scalers built in the worker as library
objects with weights the judge sends; the submission's functions called on them; the results read back.

Architectures are written once as recipes (qualified layer names and arguments), built either in the
worker (the submission's inputs) or here (the oracles). The precision a step ran in is read from the
values it returns and the parameters it leaves, never from hooks the worker could call itself; an
inf/NaN gradient is put in by a hook made of library functions. Memory is measured from outside the
worker: what its whole process tree holds, as its cgroup (else /proc) counts it (``Submission.measure``),
and, on a GPU, its device memory as the NVIDIA driver reports it (``Submission.measure_gpu``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from grader.judge.handle import Remote, Submission

from .answers import shown
from .sides import Handle, Side

Recipe = list[tuple[str, tuple]]
# What a Trainer's optimizer holds: the parameters of the whole MLP, of its last layer only, or of both Linear
# layers as two param groups (one per layer).
OPTIMIZED = {"all": ("0.weight", "0.bias", "2.weight", "2.bias"), "last": ("2.weight", "2.bias"),
             "groups": ("0.weight", "0.bias", "2.weight", "2.bias")}


def mlp(d_in: int, width: int, d_out: int) -> Recipe:
    """Linear(d_in, width) -> GELU -> Linear(width, d_out)."""
    return [("torch.nn.Linear", (d_in, width)), ("torch.nn.GELU", ()), ("torch.nn.Linear", (width, d_out))]


def block(width: int, dropout: float = 0.0) -> Recipe:
    """One MLP block Linear(w, 2w) -> GELU -> Dropout -> Linear(2w, w)."""
    return [("torch.nn.Linear", (width, 2 * width)), ("torch.nn.GELU", ()), ("torch.nn.Dropout", (dropout,)),
            ("torch.nn.Linear", (2 * width, width))]


def _placed(name: str, device: str) -> dict[str, str]:
    """Layers with weights are built on ``device`` (so a seeded build gives the same weights on both sides)."""
    return {"device": device} if name == "torch.nn.Linear" else {}


def sequential(side: Side, recipe: Recipe, device: str = "cpu") -> tuple[Handle, list[Handle]]:
    """The Sequential built on ``side``, and its layers' handles."""
    layers = [side.lib(name, *args, **_placed(name, device)) for name, args in recipe]
    return side.lib("torch.nn.Sequential", *layers), layers


def blocks(side: Side, recipe: Recipe, depth: int, state: dict | None = None,
           device: str = "cpu") -> tuple[Handle, list[Handle]]:
    """A ModuleList of ``depth`` copies of one block built on ``side`` (with ``state`` loaded), and the blocks."""
    first, _ = sequential(side, recipe, device)
    held = [first] + [side.lib("copy.deepcopy", first) for _ in range(depth - 1)]
    module_list = side.lib("torch.nn.ModuleList", held)
    if state is not None:
        load(side, module_list, state)
    return module_list, held


def load(side: Side, module: Handle, state: dict[str, torch.Tensor]) -> None:
    """``module.load_state_dict(state)``; the state crosses as keyword arguments of ``dict``
    (tensors at the top level keep the request's description short)."""
    module.call("load_state_dict", side.lib("builtins.dict", **state))


def held_tuple(sub: Submission, *tensors: torch.Tensor) -> Remote:
    """A tuple of copies of ``tensors`` built in the worker."""
    return sub.lib("builtins.tuple", [sub.lib("torch.clone", tensor) for tensor in tensors])


def parameters(sub: Submission, module: Remote) -> dict[str, torch.Tensor]:
    """The module's named parameters, read back as data."""
    return sub.lib("builtins.dict", module.call("named_parameters", keep=True)).read()


def gradients(sub: Submission, module: Remote) -> list[torch.Tensor | None]:
    """Each parameter's ``.grad`` (None where there is none), in ``named_parameters`` order."""
    grads = sub.lib("builtins.map", sub.lib("operator.attrgetter", "grad"), module.call("parameters", keep=True))
    return sub.lib("builtins.list", grads).read()


def library_function(sub: Submission, qualified: str) -> Remote:
    """The library function ``module.name`` itself (not called), held in the worker."""
    module, _, name = qualified.rpartition(".")
    return sub.lib("builtins.getattr", sub.lib("importlib.import_module", module), name)


LOSSES = ("mse", "dot")
STEP = "amp.train_step"


def describe(precision: str, scaler: dict | None, max_grad_norm: float | None, extra: str = "") -> str:
    """A ``train_step`` call on a Trainer's objects, for messages."""
    scaler_text = "None" if scaler is None else f"GradScaler('cpu', {', '.join(f'{k}={v!r}' for k, v in scaler.items())})"
    return (f"{STEP}(model, (x, y), mse_loss, SGD, scaler={scaler_text}, precision={precision!r}, "
            f"max_grad_norm={max_grad_norm}){extra}")


def check_result(result: object, call: str) -> dict:
    """``result``, once it is what ``train_step`` returns: a dict of the loss, the norm and whether it skipped."""
    assert isinstance(result, dict) and set(result) == {"loss", "grad_norm", "skipped"}, (
        f"{call} returned {shown(result)}, expected a dict with exactly the keys 'loss', 'grad_norm', 'skipped'")
    assert type(result["loss"]) is float, f"{call} returned loss {result['loss']!r:.100}, expected a Python float"
    assert type(result["skipped"]) is bool, f"{call} returned skipped {result['skipped']!r:.100}, expected a bool"
    assert result["grad_norm"] is None or type(result["grad_norm"]) is float, (
        f"{call} returned grad_norm {result['grad_norm']!r:.100}, expected a Python float or None")
    return result


def described(trainer: Trainer, kwargs: dict) -> str:
    """``train_step`` called on ``trainer``'s objects with ``kwargs``, for messages."""
    scaler_text = "GradScaler('cpu')" if trainer.scaler is not None else "None"
    arguments = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    return f"{STEP}(model, (x, y), mse_loss, SGD, scaler={scaler_text}, {arguments})"


# train_step arguments the contract refuses with ValueError ("scaler": the CPU GradScaler's arguments).
REFUSED = ({"precision": "fp16"}, {"precision": "fp16", "max_grad_norm": 1.0}, {"precision": "fp8"},
           {"precision": "float32"}, {"precision": "BF16", "scaler": {}}, {"precision": "Fp32"},
           {"precision": "fp32", "max_grad_norm": 0.0},
           {"precision": "fp32", "max_grad_norm": -1.0}, {"precision": "bf16", "max_grad_norm": -1e-3},
           {"precision": "fp32", "max_grad_norm": float("nan")})


def refused(sub: Submission, state: dict[str, torch.Tensor], x: torch.Tensor,
            y: torch.Tensor) -> Iterator[tuple[Trainer, dict, Any]]:
    """``train_step`` on (x, y) with each of ``REFUSED``'s arguments, on a fresh Trainer each: the trainer,
    the arguments of ``train_step`` and what it gave."""
    for case in REFUSED:
        kwargs = dict(case)
        trainer = Trainer(sub, state, scaler=kwargs.pop("scaler", None))
        trainer.record_forwards()
        yield trainer, kwargs, trainer.step(x, y, **kwargs)


def why_refused(kwargs: dict) -> str:
    """The contract's reason for refusing these ``train_step`` arguments."""
    if kwargs.get("max_grad_norm") is not None and not kwargs["max_grad_norm"] > 0:  # NaN included
        return "max_grad_norm must be a positive number or None"
    return "fp16 needs a GradScaler" if kwargs["precision"] == "fp16" else "precision is fp32, bf16 or fp16"


class Trainer:
    """An MLP with the judge's weights, an SGD optimizer over its parameters, a loss and optionally a
    CPU GradScaler, all in the worker; ``step`` calls the submission's ``train_step`` on them.

    The loss is ``nn.MSELoss`` ("mse") or ``einsum("ij,ij->", prediction, y)`` ("dot"): a matmul, which
    autocast runs in 16 bits, so only a loss computed inside autocast accepts a 16-bit prediction and
    a float32 ``y``. ``step(poison="inf")`` replaces the first weight's gradient by inf (or NaN) during
    that backward pass (a tensor hook ``torch.full_like``, removed after the step). ``optimized="last"``:
    the optimizer holds the last layer's parameters only (OPTIMIZED names them), the first layer is frozen
    out of the step though its gradients are computed; ``optimized="groups"``: it holds both Linear layers,
    each in its own param group. ``outside=True``: the optimizer also holds, in a group of its own, a parameter
    outside the model with a gradient already set (a learnable loss scale's, say), which ``step`` must clear.
    """

    def __init__(self, sub: Submission, state: dict[str, torch.Tensor], lr: float = 0.1,
                 scaler: dict | None = None, loss: str = "mse", optimized: str = "all", outside: bool = False) -> None:
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
        self.sub = sub
        width, d_in = state["0.weight"].shape
        self.model, self.layers = sequential(sub, mlp(d_in, width, state["2.weight"].shape[0]))
        load(sub, self.model, state)
        if optimized not in OPTIMIZED:
            raise ValueError(f"optimized must be one of {sorted(OPTIMIZED)}, got {optimized!r}")
        if optimized == "groups":
            held = [sub.lib("builtins.dict", params=layer.call("parameters", keep=True))
                    for layer in (self.layers[0], self.layers[-1])]
        else:
            held = (self.model if optimized == "all" else self.layers[-1]).call("parameters", keep=True)
        self.optimizer = sub.lib("torch.optim.SGD", held, lr=lr)
        self.outside = sub.lib("torch.nn.Parameter", torch.ones(2)) if outside else None
        if self.outside is not None:
            self.outside.set("grad", torch.ones(2))
            self.optimizer.call("add_param_group", sub.lib("builtins.dict", params=[self.outside]))
        self.scaler = sub.lib("torch.amp.GradScaler", "cpu", **scaler) if scaler is not None else None
        self.loss_fn = sub.lib("torch.nn.MSELoss") if loss == "mse" else \
            sub.lib("functools.partial", library_function(sub, "torch.einsum"), "ij,ij->")

    def step(self, x: torch.Tensor, y: torch.Tensor, precision: str = "fp32", max_grad_norm: float | None = None,
             poison: str | None = None) -> Any:
        """``amp.train_step``'s result (or ``wire.Raised``) on the batch (x, y)."""
        hook = None
        if poison is not None:
            corrupt = self.sub.lib("functools.partial", library_function(self.sub, "torch.full_like"),
                                   fill_value=float(poison))
            hook = self.layers[0].get("weight", keep=True).call("register_hook", corrupt, keep=True)
        result = self.sub.attempt(STEP, self.model, held_tuple(self.sub, x, y), self.loss_fn,
                                  self.optimizer, scaler=self.scaler, precision=precision, max_grad_norm=max_grad_norm)
        if hook is not None:
            hook.call("remove")
        return result

    def record_forwards(self) -> None:
        """From now on, note whether the model runs: a forward pre-hook made of library functions,
        ``functools.partial(operator.setitem, calls)``, which sets ``calls[model] = args`` on each call."""
        self.calls = self.sub.lib("builtins.dict")
        record = self.sub.lib("functools.partial", library_function(self.sub, "operator.setitem"), self.calls)
        self.model.call("register_forward_pre_hook", record, keep=True)

    def ran(self) -> bool:
        """Whether the model ran since ``record_forwards``."""
        return self.sub.lib("builtins.len", self.calls).read() > 0

    def parameters(self) -> dict[str, torch.Tensor]:
        return parameters(self.sub, self.model)

    def grads_none(self) -> list[bool]:
        return [grad is None for grad in gradients(self.sub, self.model)]

    def outside_grad_none(self) -> bool:
        """Whether the parameter outside the model (``outside=True``) has no gradient now."""
        return self.outside.get("grad") is None

    def scale(self) -> float | None:
        return None if self.scaler is None else self.scaler.call("get_scale")


def run_steps(sub: Submission, state: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor,
              precision: str = "fp32", scaler: dict | None = None, max_grad_norm: float | None = None,
              lr: float = 0.1, poisons: Any = (None,), loss: str = "mse",
              optimized: str = "all", outside: bool = False) -> tuple[Trainer, list, list]:
    """``amp.train_step`` once per entry of ``poisons`` on a Trainer built in the worker: the trainer
    (to read back parameters and gradients), the results, and the scale after each step."""
    trainer = Trainer(sub, state, lr=lr, scaler=scaler, loss=loss, optimized=optimized, outside=outside)
    results, scales = [], []
    for poison in poisons:
        results.append(trainer.step(x, y, precision, max_grad_norm, poison))
        if scaler is not None:
            scales.append(trainer.scale())
    return trainer, results, scales


def train(sub: Submission, state: dict[str, torch.Tensor], batches: list, steps: Any, lr: float,
          scaler: dict | None = None, **options: Any) -> dict:
    """``amp.train`` on an MLP and SGD in the worker (with a CPU GradScaler built from ``scaler``'s arguments
    when given; ``options``: its precision, max_grad_norm); ``get_batch`` is a judge callback that hands out
    ``batches`` in order. Returns the losses (or ``wire.Raised``), the number of get_batch calls, the
    parameters and which gradients are None afterwards."""
    trainer = Trainer(sub, state, lr=lr, scaler=scaler)
    if trainer.scaler is not None:
        options["scaler"] = trainer.scaler
    calls = [0]

    def get_batch() -> tuple[torch.Tensor, torch.Tensor]:
        calls[0] += 1
        return batches[(calls[0] - 1) % len(batches)]  # crosses to the worker as data

    losses = sub.attempt("amp.train", trainer.model, sub.callback(get_batch), trainer.loss_fn, trainer.optimizer, steps,
                         **options)
    return {"losses": losses, "calls": calls[0], "params": trainer.parameters(), "grads_none": trainer.grads_none()}


def checkpointed(sub: Submission, blocks: Remote, x: torch.Tensor, input_grad: bool, enabled: bool,
                 seed: int | None = None) -> tuple[Remote, Remote]:
    """``amp.checkpointed(blocks, x, enabled)`` in the worker on a copy of ``x`` (requiring grad or
    not), after ``torch.manual_seed(seed)`` there: the copy of x and the output, both kept there."""
    x_held = sub.lib("torch.clone", x)
    x_held.call("requires_grad_", input_grad)
    if seed is not None:
        sub.lib("torch.manual_seed", seed)
    # ``new`` calls a submission callable and keeps its result in the worker (a function works too).
    return x_held, sub.new("amp.checkpointed", blocks, x_held, enabled=enabled)


def backward_of_square_sum(output: Remote) -> None:
    output.call("square", keep=True).call("sum", keep=True).call("backward")


def held_bytes(sub: Submission) -> int:
    """The memory the worker's whole process tree holds, as the kernel counts it (its cgroup: memfds,
    tmpfs files, kernel buffers and children included; else its processes in /proc: ``Submission.measure``),
    plus every byte it has written (wchar: to a file on disk, with O_DIRECT or not, memory that left it)
    and what its files on disk hold (written through a shared mapping too: ``Submission.measure_files``)."""
    usage = sub.measure()
    return usage.memory_bytes + usage.written_bytes + sub.measure_files()


NO_KERNEL_COUNT = ("not run: this host gives the worker no memory limit that counts kernel buffers (a cgroup): "
                   "what it keeps passed the count of its processes' memory and files, which leaves out what pipes "
                   "and sockets hold, so the point is not awarded here (a failure would stand)")


def kernel_buffers_counted(sub: Submission) -> bool:
    """Whether the worker's memory figure is its cgroup's, which charges kernel buffers (pipes, sockets,
    message queues) too; the watchdog's count of its processes does not."""
    return sub.measure().source.startswith("cgroup")


def return_freed_memory(sub: Submission) -> None:
    """Ask the worker's C library to give back the memory it holds free now and to map every later
    allocation of 64 KiB or more on its own, so that its resident set follows the tensors it holds."""
    sub.release_memory()


def held_after(run: Callable[[], Remote], measure: Callable[[], int | None]) -> tuple[int | None, Remote]:
    """What ``measure()`` grows by while ``run()`` builds its output (kept in the worker)."""
    before = measure()
    output = run()
    after = measure()
    return (None if before is None or after is None else after - before), output


def grown_by(sub: Submission, run: Callable[[], Remote], warm_up: bool = False,
             keep: bool = True) -> tuple[int, Remote | None]:
    """How much the worker's memory (``held_bytes``) grows while ``run()`` builds its output, after
    its C library handed freed memory back; with ``warm_up``, on a second run (a first run takes
    one-time allocations, which only add). The output, kept in the worker, or released and None."""
    for first in (True, False)[not warm_up:]:
        return_freed_memory(sub)
        grown, output = held_after(run, lambda: held_bytes(sub))
        if first or not keep:
            output.release()
    return grown, output if keep else None


def missing_gradients(sub: Submission, module: Remote, after: Remote) -> int:
    """How many parameters of ``module`` get no gradient from the backward of ``after``'s squares'
    sum (``after`` released then)."""
    backward_of_square_sum(after)
    after.release()
    return sum(grad is None for grad in gradients(sub, module))


def plain_forward(sub: Submission, blocks: list[Remote], x: Remote) -> Remote:
    """``for block in blocks: x = block(x)`` driven from the judge (library code only); the
    intermediate handles are released, the output kept."""
    value = x
    for module in blocks:
        result = module.call("__call__", value, keep=True)
        if value is not x:
            value.release()
        value = result
    return value


@dataclass(frozen=True)
class CudaCheckpointed:
    """One CUDA run of ``amp.checkpointed`` then backward, measured (``cuda_checkpointed``)."""

    peak: int  # torch.cuda.max_memory_allocated in the worker: its own figure, for the message
    device_grown: int | None  # device memory the NVIDIA driver shows the worker gaining during the forward
    host_grown: int  # host memory the worker's tree gained during the forward, as the kernel counts it
    why_no_device: str  # why the driver could not say (when device_grown is None)
    missing: int  # parameters left without a gradient


def cuda_checkpointed(sub: Submission, depth: int, width: int, n: int) -> CudaCheckpointed:
    """``amp.checkpointed`` on ``depth`` MLP blocks and x of shape (n, width) on CUDA, then backward,
    twice (the first run warms up kernels and the caching allocator). What the forward keeps for
    backward is measured from outside on the second run, cache emptied after it: on the device by
    the NVIDIA driver (NVML, for the worker's processes: ``Submission.measure_gpu``) and on the host by the kernel
    (``Submission.measure``), so that activations moved off the GPU still count."""
    sub.lib("torch.manual_seed", 0)
    held, _ = blocks(sub, block(width), depth, device="cuda")
    x = sub.lib("torch.randn", n, width, device="cuda")

    def cuda(name: str) -> Any:
        return sub.lib(f"torch.cuda.{name}").read()

    def forward() -> Remote:
        output = sub.new("amp.checkpointed", held, x, timeout=120)
        cuda("synchronize"), cuda("empty_cache")
        return output

    for _ in range(2):
        held.call("zero_grad", set_to_none=True)
        cuda("synchronize"), cuda("empty_cache"), cuda("reset_peak_memory_stats")
        return_freed_memory(sub)
        host_before, device_before = held_bytes(sub), sub.measure_gpu()
        output = forward()
        host_grown, device_after = held_bytes(sub) - host_before, sub.measure_gpu()
        backward_of_square_sum(output)
        output.release()
        cuda("synchronize")
    device_grown = None if device_before.device_bytes is None or device_after.device_bytes is None else \
        device_after.device_bytes - device_before.device_bytes
    return CudaCheckpointed(cuda("max_memory_allocated"), device_grown, host_grown, device_after.unavailable,
                            sum(grad is None for grad in gradients(sub, held)))


def cuda_training(sub: Submission, recipe: Recipe, dim: int, small: tuple[torch.Tensor, torch.Tensor], steps: int,
                  lr: float) -> tuple[dict[str, float], dict[str, Any], dict[str, Any]]:
    """Per precision (fp32, bf16), TF32 off: ``amp.train`` for 2 warm-up steps on ``small``, then for
    ``steps`` steps on a (dim, dim) batch drawn in the worker, on a fresh model built by ``recipe``
    on CUDA: the wall time the judge sees around the timed call, its losses and the warm-up's."""
    sub.lib("torch.set_float32_matmul_precision", "highest")
    sub.lib("torch.manual_seed", 1)
    held = {"large": (sub.lib("torch.randn", dim, dim, device="cuda"), sub.lib("torch.randn", dim, dim, device="cuda")),
            "small": tuple(sub.lib("torch.clone", t.cpu()).call("to", "cuda", keep=True) for t in small)}
    seconds, losses, warm_up = {}, {}, {}
    for precision in ("fp32", "bf16"):
        sub.lib("torch.manual_seed", 0)
        model, _ = sequential(sub, recipe, device="cuda")
        optimizer = sub.lib("torch.optim.SGD", model.call("parameters", keep=True), lr=lr)
        loss_fn = sub.lib("torch.nn.MSELoss")
        batches = sub.lib("itertools.repeat", held["small"]).get("__next__", keep=True)
        warm_up[precision] = sub.call("amp.train", model, batches, loss_fn, optimizer, 2, precision=precision,
                                      timeout=120)
        batches = sub.lib("itertools.repeat", held["large"]).get("__next__", keep=True)
        start = time.perf_counter()
        losses[precision] = sub.call("amp.train", model, batches, loss_fn, optimizer, steps, precision=precision,
                                     timeout=240)
        sub.lib("torch.cuda.synchronize")
        seconds[precision] = time.perf_counter() - start
    return seconds, losses, warm_up
