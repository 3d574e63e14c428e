"""Reading the kit's TOML catalogs (mutants, attacks, equivalent mutants) on Python 3.10 to 3.13."""

from __future__ import annotations

from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib


class CatalogError(ValueError):
    """A catalog entry that cannot be used (a mutant that does not apply, an attack that names no stored file)."""


def read_toml(path: Path) -> dict[str, Any]:
    return tomllib.loads(path.read_text())
