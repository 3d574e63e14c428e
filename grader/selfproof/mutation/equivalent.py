"""The reviewed list of equivalent mutants (``grader/selfproof/mutation/equivalent.toml``).

Each ``[[equivalent]]`` names a mutant by ``module``, ``operator`` (the engine's name,
e.g. ``core/NumberReplacer``), ``line`` (the mutated line's text, stripped), optional
``index`` (its rank among mutants of that operator on equal lines, from 0) and gives the
``reason`` it cannot change any behaviour the contract specifies.
"""

from __future__ import annotations

from pathlib import Path

from ...toml_catalogs import read_toml
from .regions import Identity

LIST = Path(__file__).parent / "equivalent.toml"


class EquivalentListError(ValueError):
    """An entry of the equivalent list is incomplete or repeated."""


def load(path: Path = LIST) -> dict[Identity, str]:
    """Identity -> reason."""
    if not path.exists():
        return {}
    found: dict[Identity, str] = {}
    for number, entry in enumerate(read_toml(path).get("equivalent", []), start=1):
        missing = [key for key in ("module", "operator", "line", "reason") if not str(entry.get(key, "")).strip()]
        if missing:
            raise EquivalentListError(f"{path.name}: entry {number} lacks {', '.join(missing)}")
        identity = Identity(entry["module"], entry["operator"], entry["line"].strip(), int(entry.get("index", 0)))
        if identity in found:
            raise EquivalentListError(f"{path.name}: entry {number} repeats {identity}")
        found[identity] = entry["reason"].strip()
    return found
