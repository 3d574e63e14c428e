"""grader.bench.mistaken_cost grades the reference beside the reference with known mistakes appended."""

from __future__ import annotations

import pytest

from grader.bench import mistaken_cost
from grader.paths import KIT_ROOT


def test_each_mistake_is_appended_to_its_own_module(tmp_path):
    package = mistaken_cost.mistaken(["p1_memory_subnormal_exponent.py", "p5_optim_adagrad_eps_in_root.py"], tmp_path / "m")
    for module, mistake in (("memory", "p1_memory_subnormal_exponent.py"), ("optim", "p5_optim_adagrad_eps_in_root.py")):
        text = (package / f"{module}.py").read_text()
        assert text.startswith((KIT_ROOT / "solutions" / f"{module}.py").read_text())
        assert text.endswith((mistaken_cost.MISTAKES / mistake).read_text())
    assert (package / "einsum.py").read_text() == (KIT_ROOT / "solutions" / "einsum.py").read_text()


def test_an_unknown_mistake_is_refused_before_any_grading(capsys):
    with pytest.raises(SystemExit) as stopped:
        mistaken_cost.main(["--mistake", "p1_memory_no_such_mistake.py"])
    assert stopped.value.code == 2 and "p1_memory_no_such_mistake.py" in capsys.readouterr().err
