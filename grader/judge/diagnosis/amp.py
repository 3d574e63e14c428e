"""P8's known mistakes, named by what a mixed precision training step does rather than by a replay.

P8's hidden tests drive training loops through judge callbacks and measure memory from outside the
worker: no recording of them replays. For P8's failed tests the judge instead runs one fixed probe
(``signature``) on the CPU: a few ``train_step`` calls on a tiny MLP, SGD, loss and ``GradScaler`` built
by the judge (fp32, bf16 autocast on inputs where 16-bit rounding shows, fp16 with a scaler, a loss
that is a matmul, clipping with and without a scaler and over two param groups, an inf gradient with and
without a scaler, a scale that grows), the
arguments the contract refuses, ``train`` with whole, zero and bad step counts, ``checkpointed``
with an input that needs no gradient, and whether ``checkpointed`` keeps only about one block input per
block for backward (the hidden test's bound: for the student measured from outside its worker as that
test measures it, for a variant counted in the judge with saved_tensors_hooks). The student's functions run in a fresh worker of the submission
(started once the suite's own worker is closed, ``grader.judge.plugin``), each known variant's in the
judge (``InJudge``: kit code, never the student's), on the same objects built the same way. The
signature holds only what the judge reads back: the returned values (or exception types), the
parameters and which gradients are None after the steps, the scaler's scale, and what ``checkpointed``'s
output gives. A variant whose signature is the student's is named on a failed test only when it differs
from the reference in an observation that bears on that test (``OBSERVED_BY``).
"""

from __future__ import annotations

import warnings
from types import ModuleType
from typing import Any

import torch

from ..drivers import amp as drive
from ..drivers.amp_oracle import (MEASURABLE, batch, blocks_state, checkpoint_memory, max_param_diff, model_state,
                                  oracle_norm, saved_bytes, visible_case)
from ..drivers.sides import JUDGE, Local, one_thread, unwrap
from ..handle import StudentError, Submission
from ..inprocess import InProcess
from . import probe
from .probe import UNMEASURED, Signature

SEED, WIDTH, ROWS = 7, 6, 4  # the probe's MLP (8 -> WIDTH -> 4) and batch
SCALER = {"init_scale": 1024.0}
FP16_SCALER = {"init_scale": 256.0}
CLIP_FRACTION = 0.5  # max_grad_norm as a fraction of the gradient norm: clipping changes the step
STEP_COUNTS = (2, 2.0, 0, -1, 2.5)  # train's steps: whole counts, none, and two it must refuse
# The observations that bear on each hidden P8 test (grader/judge/hidden/test_p8_amp.py): a variant is
# named on a failed test only when it differs from the reference in one of them.
OBSERVED_BY = {
    "test_fp32_step_matches_a_manual_step": ("fp32 step",),
    "test_gradients_none_and_parameters_float32": ("gradients", "fp32 step", "bf16 step", "fp16 step"),
    "test_grad_norm_is_the_unscaled_norm_before_clipping": ("clipped", "clipped and scaled", "bf16 step"),
    "test_clipping_is_applied_to_unscaled_gradients": ("clipped", "clipped and scaled", "clipped in two groups"),
    "test_non_finite_gradient_skips_the_step": ("inf step", "inf step without a scaler", "scale grows", "gradients",
                                                "clipped and scaled", "bf16 step", "fp16 step"),
    "test_autocast_follows_precision_and_batch_device": ("bf16 step", "fp32 on 16-bit inputs", "fp16 step",
                                                         "dot loss"),
    "test_bad_arguments_raise_value_error": ("bad arguments", "fp32 step"),
    "test_checkpointed_values_and_gradients": ("checkpointed",),
    "test_checkpointed_keeps_only_block_inputs": ("checkpointed", "keeps block inputs only"),
    "test_train_runs_train_step_per_batch": ("train", "gradients", "fp32 step", "bf16 step"),
    "test_checkpointed_lowers_peak_cuda_memory": ("checkpointed", "keeps block inputs only"),
    "test_bf16_training_is_faster_than_fp32": ("train", "bf16 step"),
}

class InJudge:
    """A variant's ``amp`` module (kit code) driven in the judge as the drivers drive a ``Submission``:
    ``lib`` builds library objects here, ``attempt`` and ``new`` call the module's functions."""

    def __init__(self, module: ModuleType) -> None:
        self.module = module

    def lib(self, target: str, *args: Any, **kwargs: Any) -> Local:
        return JUDGE.lib(target, *args, **kwargs)

    def attempt(self, target: str, *args: Any, **kwargs: Any) -> Any:
        return probe.attempt(self._function(target), *args, **kwargs)

    def new(self, target: str, *args: Any, **kwargs: Any) -> Local:
        """The function's result kept for driving; what it raises fails as the worker's would (StudentError)."""
        try:
            return Local(self._function(target)(*unwrap(args), **unwrap(kwargs)))
        except Exception as exc:  # noqa: BLE001 - as Submission.new reports a raise
            raise StudentError(f"{target} raised {type(exc).__name__}") from None

    def _function(self, target: str) -> Any:
        return getattr(self.module, target.rpartition(".")[2])


def stepped(side: Submission | InJudge, state: dict, x: torch.Tensor, y: torch.Tensor, precision: str = "fp32",
            scaler: dict | None = None, max_grad_norm: float | None = None, poisons: tuple = (None,),
            loss: str = "mse", optimized: str = "all") -> tuple[tuple, tuple, dict, tuple]:
    """``train_step`` once per entry of ``poisons`` on a fresh Trainer (its optimizer over ``optimized``, as
    ``drive.Trainer`` says): what each returned, the scale after each, the parameters after them, and which
    gradients are None."""
    trainer, results, scales = drive.run_steps(side, state, x, y, precision, scaler, max_grad_norm, poisons=poisons,
                                               loss=loss, optimized=optimized)
    return tuple(results), tuple(scales), trainer.parameters(), tuple(trainer.grads_none())


def trained(side: Submission | InJudge, state: dict, x: torch.Tensor, y: torch.Tensor) -> tuple:
    """What ``train`` gives for each of ``STEP_COUNTS`` on batches (x, y) handed out by a library iterator."""
    attempts = []
    for steps in STEP_COUNTS:
        trainer = drive.Trainer(side, state)
        get_batch = side.lib("itertools.repeat", drive.held_tuple(side, x, y)).get("__next__", keep=True)
        attempts.append(side.attempt("amp.train", trainer.model, get_batch, trainer.loss_fn, trainer.optimizer, steps))
    return tuple(attempts)


def checkpointed(side: Submission | InJudge) -> tuple:
    """``checkpointed`` on two blocks and an input that needs no gradient: its output, whether that requires
    grad, and how many parameters a backward from it leaves without a gradient (None without one)."""
    held, _ = drive.blocks(side, drive.block(WIDTH), 2, blocks_state(SEED, 2, WIDTH))
    try:
        _, output = drive.checkpointed(side, held, batch(SEED, ROWS, d_in=WIDTH)[0], False, True, seed=SEED)
    except StudentError:
        return ("raised",)
    requires = output.get("requires_grad")
    return output.read(), requires, drive.missing_gradients(side, held, after=output) if requires is True else None


BELOW_FLOOR = "below the floor"  # keeps under half a block input per block


def keeps_block_inputs_only(side: Submission | InJudge) -> bool | str:
    """Whether ``checkpointed(enabled=True)`` keeps for backward at most about one block input per block (the
    bound of ``test_checkpointed_keeps_only_block_inputs``; ``BELOW_FLOOR`` where it keeps under half a block
    input per block, that test's floor: one checkpoint around the whole stack): for the student, how much its worker's memory
    grows while the output is built, read from outside as that test reads it (``UNMEASURED`` where a plain
    forward does not show, or where the submission runs in the judge's own process: nothing is outside it);
    for a variant, the bytes saved for backward, counted in the judge."""
    if isinstance(side, Submission) and isinstance(side.backend, InProcess):
        return UNMEASURED
    case = checkpoint_memory()
    held, blocks = drive.blocks(side, drive.block(case.width), case.depth, case.state)
    try:
        if isinstance(side, InJudge):
            kept = saved_bytes(held.obj, lambda: side.new("amp.checkpointed", held, case.x, enabled=True).obj)
        else:
            x_held = side.lib("torch.clone", case.x)
            calibration, _ = drive.grown_by(side, lambda: drive.plain_forward(side, blocks, x_held), keep=False)
            if calibration < MEASURABLE * case.plain:
                return UNMEASURED
            kept, _ = drive.grown_by(side, lambda: side.new("amp.checkpointed", held, x_held, enabled=True),
                                     warm_up=True, keep=False)
    except StudentError:
        return "raised"
    return BELOW_FLOOR if kept < case.floor else kept <= case.bound


def signature(side: Submission | InJudge) -> Signature:
    """The probe: what the implementation on ``side`` does, each observation made by the judge (torch on one
    thread on each side, so that both reduce in the same order)."""
    with one_thread(side):
        return _observed(side)


def _observed(side: Submission | InJudge) -> Signature:
    state, (x, y) = model_state(SEED, WIDTH), batch(SEED, ROWS)
    visible, vx, vy = visible_case(SEED, WIDTH, ROWS)
    clip = CLIP_FRACTION * oracle_norm(state, x, y)
    runs = {"fp32 step": stepped(side, state, x, y),
            "bf16 step": stepped(side, visible, vx, vy, "bf16"),
            "fp32 on 16-bit inputs": stepped(side, visible, vx, vy),
            "fp16 step": stepped(side, visible, vx, vy, "fp16", FP16_SCALER),
            "dot loss": stepped(side, visible, vx, vy, "bf16", loss="dot"),
            "scaled step": stepped(side, state, x, y, scaler=SCALER),
            "clipped": stepped(side, state, x, y, max_grad_norm=clip),
            "clipped and scaled": stepped(side, state, x, y, scaler=SCALER, max_grad_norm=clip),
            "clipped in two groups": stepped(side, state, x, y, max_grad_norm=clip, optimized="groups"),
            "inf step": stepped(side, state, x, y, scaler=SCALER, poisons=("inf", None)),
            "inf step without a scaler": stepped(side, state, x, y, poisons=("inf", None)),
            "scale grows": stepped(side, state, x, y, scaler={**SCALER, "growth_interval": 1})}
    seen: Signature = {name: run[:3] for name, run in runs.items()}
    seen["gradients"] = tuple(run[3] for run in runs.values())
    seen["bad arguments"] = tuple((probe.raised(attempt), max_param_diff(trainer.parameters(), state) == 0)
                                  for trainer, _, attempt in drive.refused(side, state, x, y))
    seen["train"] = trained(side, state, x, y)
    seen["checkpointed"] = checkpointed(side)
    seen["keeps block inputs only"] = keeps_block_inputs_only(side)
    return seen


def of_student(submission: Submission, seconds: float) -> Signature | None:
    """The student's signature, from a fresh worker of the submission within ``seconds`` (None: nothing known)."""
    return probe.of_student(submission, seconds, "P8", 1, signature)


def of_variant(module: ModuleType) -> Signature:
    """A variant's signature, its ``amp`` module run in the judge (a CUDA autocast's warning on a CPU silenced)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return signature(InJudge(module))
