"""P7's checkpoints as files: the judge's reading of one (any faithful layout), the folder reader
it goes through, and the second worker checkpoints are loaded in."""

from __future__ import annotations

import collections
import io
import os
import random
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from grader.judge import handle
from grader.judge.drivers import checkpoint as drive
from grader.judge.drivers import checkpoint_file
from grader.judge.drivers.folder import Folder

ITERATION = 4099
EXTRAS = {"note": "kept", "history": [3.1, (2.5, None)], "mask": torch.tensor([True, False])}


@pytest.fixture(scope="module")
def point() -> drive.SavePoint:
    return drive.save_point("adamw", warmup=2)


def saved(payload: object) -> bytes:
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    return buffer.getvalue()


def expected(point: drive.SavePoint) -> dict:
    return {"model": point.model, "optimizer": point.optimizer, "iteration": ITERATION, "rng": point.rng,
            "extras": EXTRAS}


def layouts(point: drive.SavePoint) -> dict[str, dict]:
    """Checkpoints a correct submission may write, each holding the whole state in its own way."""
    torch_state, (_, keys, pos, has_gauss, gauss), python_state = point.rng
    numpy_plain = {"bit_generator": "MT19937", "keys": keys.tolist(), "pos": pos, "has_gauss": has_gauss,
                   "cached_gaussian": gauss}
    return {
        "the reference's": {"model": point.model, "optimizer": point.optimizer, "iteration": ITERATION,
                            "extra": EXTRAS, "rng": {"torch": torch_state, "numpy": numpy_plain,
                                                     "python": python_state}},
        "nested, an OrderedDict, the iteration a tensor": {
            "state": {"net": collections.OrderedDict(point.model), "opt": point.optimizer},
            "meta": [{"step": torch.tensor(ITERATION)}, {"user": EXTRAS}],
            "rngs": (torch_state, ("MT19937", keys.tolist(), pos, has_gauss, gauss), python_state)},
        "RNG states as other sequences, extras merged in": {
            "model": point.model, "optimizer": point.optimizer, "it": float(ITERATION), **EXTRAS,
            "torch_rng": torch_state.tolist(), "numpy_keys": torch.from_numpy(keys.astype(np.int64)).to(torch.int32),
            "numpy_rest": [pos, has_gauss, gauss], "python_rng": torch.tensor(python_state[1])},
    }


@pytest.mark.parametrize("layout", ["the reference's", "nested, an OrderedDict, the iteration a tensor",
                                    "RNG states as other sequences, extras merged in"])
def test_a_checkpoint_is_found_in_any_faithful_layout(point, layout):
    assert checkpoint_file.check(saved(layouts(point)[layout]), **expected(point)) == ""


@pytest.mark.parametrize("part, reported", [("model", "model's state_dict"), ("optimizer", "optimizer's state_dict"),
                                            ("iteration", "iteration 4099"), ("extra", "extras"),
                                            ("rng", "torch.get_rng_state()")])
def test_a_part_left_out_is_reported(point, part, reported):
    payload = dict(layouts(point)["the reference's"])
    del payload[part]
    assert reported in checkpoint_file.check(saved(payload), **expected(point))


def test_a_state_changed_after_the_save_is_no_match(point):
    payload = dict(layouts(point)["the reference's"])
    payload["model"] = {name: tensor + (name == "0.weight") for name, tensor in point.model.items()}
    assert "model's state_dict" in checkpoint_file.check(saved(payload), **expected(point))


def test_a_key_kept_for_a_state_held_in_memory_is_no_checkpoint(point):
    assert "cannot read it" in checkpoint_file.check(b"5f0e2a9c1b7d3e84", **expected(point))


def test_a_file_carrying_code_is_not_run_by_the_judge(point, tmp_path):
    marker = tmp_path / "pwned"
    data = saved(drive.hostile_checkpoint(point, str(marker)))
    assert "cannot read it" in checkpoint_file.check(data, iteration=1) and not marker.exists()


def test_a_numpy_array_is_traced_to_the_rule_it_breaks(point):
    """numpy's RNG state kept as an array: the judge names the rule it breaks, never torch's advice to load it anyway."""
    why = checkpoint_file.check(saved({"model": point.model, "rng": np.random.get_state()}), model=point.model)
    assert "numpy" in why and why.count("[P7.loads-safely]") == 1 and "False" not in why, why


def test_compressed_records_are_refused_before_torch_reads_them(point):
    """torch.load inflates deflated records: a small file could fill the judge's memory."""
    plain = zipfile.ZipFile(io.BytesIO(saved(layouts(point)["the reference's"])))
    packed = io.BytesIO()
    with zipfile.ZipFile(packed, "w", zipfile.ZIP_DEFLATED) as archive:
        for record in plain.infolist():
            archive.writestr(record.filename, plain.read(record.filename))
    assert "compressed" in checkpoint_file.check(packed.getvalue(), **expected(point))


class _Exchanging:
    """What Folder needs of a submission: its exchange folder."""

    def __init__(self, host: Path) -> None:
        self.host = host

    def exchange(self) -> handle.Exchange:
        return handle.Exchange(host=self.host, inside=str(self.host))


def test_the_folder_reads_no_link_the_worker_planted(tmp_path):
    secret = tmp_path / "judge-secret"
    secret.write_bytes(b"not for the worker")
    (tmp_path / "exchange").mkdir()
    with Folder(_Exchanging(tmp_path / "exchange"), "files") as folder:
        os.symlink(secret, folder.host / "ckpt.pt")
        os.mkfifo(folder.host / "fifo")
        folder.write("real.pt", b"checkpoint")
        assert folder.read("ckpt.pt") is None and folder.read("fifo") is None and folder.read("missing") is None
        assert folder.read("real.pt") == b"checkpoint" and folder.read("real.pt", 5) == b"check"
        assert folder.files() == {"ckpt.pt": None, "fifo": None, "real.pt": b"checkpoint"}


def test_the_folder_snapshot_moves_with_any_change(tmp_path):
    (tmp_path / "exchange").mkdir()
    with Folder(_Exchanging(tmp_path / "exchange"), "trap") as folder:
        before = drive.settle(folder)
        (folder.host / "pwned").mkdir()
        (folder.host / "pwned").rmdir()
        assert folder.snapshot() != before and folder.listing() == []


def test_the_loading_worker_outlives_its_thread_and_the_other_worker():
    """The loader's worker is started on a thread (bubblewrap kills it when that thread ends) and
    must survive the main worker stopping (which reaps the judge's orphans)."""
    from grader.containment.worker import Worker

    folder = Path(__file__).resolve().parents[3] / "solutions"
    main = handle.Submission(Worker(folder), folder)
    try:
        main.call("checkpoint.load_checkpoint_extras", main.lib("io.BytesIO", saved({"extra": {}})))
        with drive.Loader(main.sibling()) as loader:
            pid = loader.sub.worker_pid()
            time.sleep(0.5)
            main.close()
            data = saved({"extra": {"seed": random.Random(0).random()}})
            assert loader.sub.call("checkpoint.load_checkpoint_extras", loader.path(data)) == torch.load(
                io.BytesIO(data), weights_only=True)["extra"]
            assert loader.sub.worker_pid() == pid and loader.sub.backend.restarts == 0
    finally:
        main.close()
