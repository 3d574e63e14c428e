"""The catalog of known mistakes, a fact of the problem set: plausible student bugs, each a small
edit of the reference (a mutant). The judge's diagnosis names them, the self-proof's kill matrix
grades them, the release's leak check refuses their text: all three import it from here, below them.

One TOML file per problem (``p<N>_<module>.toml``) lists ``[[mutant]]`` tables with ``id``,
``description``, ``find`` (text that occurs exactly once in ``solutions/<module>.py``) and
``replace``; ``gpu = true`` marks a mutant only a GPU test can kill (graded by ``grader selfcheck
--gpu`` on a GPU runner, left out of the CPU kill matrix). Each is also a known mistake that
feedback names (``grader.judge.diagnosis``): optional ``misconception`` (the mistake in one sentence a
student understands; the description when absent), ``section`` (the ``module.Name`` heading of
handout.md that explains it; by default the reference's top-level definition holding ``find``),
``diagnose = false`` (never named) and ``rules`` (the handout rule ids it breaks, ``["P5.skip-none-grad"]``:
the rule map asks a public and a hidden test of each rule to kill it, ``grader.selfproof.rulemap``). ``materialize`` writes a submission
folder with that one edit applied.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..toml_catalogs import CatalogError, read_toml
from ..submission import stage
from ..paths import SOLUTIONS

CATALOG = Path(__file__).parent
_FILE = re.compile(r"p(\d+)_(\w+)\.toml")


@dataclass(frozen=True)
class Mutant:
    id: str
    problem: str
    module: str
    description: str
    find: str
    replace: str
    gpu: bool = False
    misconception: str = ""
    section: str = ""
    diagnose: bool = True
    rules: tuple[str, ...] = ()

    def apply(self, source: str) -> str:
        count = source.count(self.find)
        if count != 1:
            raise CatalogError(f"mutant {self.id}: its 'find' text occurs {count} times in {self.module}.py, not once")
        return source.replace(self.find, self.replace)


def load(catalog: Path = CATALOG) -> list[Mutant]:
    mutants = []
    for path in sorted(catalog.glob("p*_*.toml")):
        match = _FILE.fullmatch(path.name)
        if not match:
            raise CatalogError(f"{path.name}: mutant files are named p<N>_<module>.toml")
        for entry in read_toml(path).get("mutant", []):
            mutants.append(Mutant(id=entry["id"], problem=f"P{match.group(1)}", module=match.group(2),
                                  description=entry["description"], find=entry["find"], replace=entry["replace"],
                                  gpu=bool(entry.get("gpu", False)),
                                  misconception=entry.get("misconception", entry["description"]),
                                  section=entry.get("section", ""), diagnose=bool(entry.get("diagnose", True)),
                                  rules=tuple(entry.get("rules", ()))))
    ids = [m.id for m in mutants]
    if len(ids) != len(set(ids)):
        raise CatalogError(f"duplicate mutant ids: {sorted({i for i in ids if ids.count(i) > 1})}")
    return mutants


def materialize(mutant: Mutant, dest: Path, solutions: Path = SOLUTIONS) -> Path:
    """Write ``dest/assignment/``: the reference with the mutant's edit; returns the package folder."""
    package = stage(solutions, dest)
    target = package / f"{mutant.module}.py"
    target.write_text(mutant.apply(target.read_text()))
    return package
