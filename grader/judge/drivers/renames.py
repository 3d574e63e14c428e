"""Ctrl-C in the worker as a file is renamed: ``os.replace``, ``os.rename`` and a submitted module's globals
bound to them (``from os import replace``) raise KeyboardInterrupt for the calls of one block."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

from ..handle import Remote, StudentError, Submission, holding
from ...paths import PACKAGE


RENAMES = ("replace", "rename")  # the os functions that move a file over another


def names_bound_to(sub: Submission, module: Remote, value: Remote) -> list[str]:
    """The names of ``module``'s globals that are ``value`` itself (``from os import replace`` binds one to
    ``os.replace``), told apart in the worker by identity: only names and bools cross back."""
    with holding(sub.lib("builtins.vars", module)) as namespace, \
            holding(sub.lib("importlib.import_module", "operator")) as operator_module, \
            holding(operator_module.get("is_", keep=True)) as is_, \
            holding(sub.lib("functools.partial", is_, value)) as is_value, \
            holding(namespace.call("values", keep=True)) as values, \
            holding(sub.lib("builtins.map", is_value, values)) as hits, \
            holding(sub.lib("builtins.list", hits)) as same, \
            holding(sub.lib("builtins.list", namespace)) as names:
        return [name for name, hit in zip(names.read(), same.read()) if hit]


@contextlib.contextmanager
def interrupted_renames(sub: Submission, module: str) -> Iterator[Callable[[], int]]:
    """While the block runs, the worker's ``os.replace`` and ``os.rename``, and every global of the submitted
    ``module`` bound to one of them (``from os import replace``), raise KeyboardInterrupt (a ``unittest.mock.Mock``
    built there, as Ctrl-C would at that moment); yields a function that reads how many calls they got."""
    with holding(sub.lib("importlib.import_module", "os")) as os_module, \
            holding(sub.lib("importlib.import_module", f"{PACKAGE}.{module}")) as submitted, \
            holding(sub.lib("builtins.KeyboardInterrupt", "interrupted as the file is renamed")) as interrupt, \
            holding(sub.lib("unittest.mock.Mock", side_effect=interrupt)) as renames:
        originals = [(os_module, name, os_module.get(name, keep=True)) for name in RENAMES]
        originals += [(submitted, alias, submitted.get(alias, keep=True))
                      for _, _, function in list(originals) for alias in names_bound_to(sub, submitted, function)]
        try:
            for owner, name, _ in originals:
                owner.set(name, renames)
            yield lambda: renames.get("call_count")
        finally:
            with contextlib.suppress(StudentError):
                for owner, name, original in originals:
                    owner.set(name, original)
                    original.release()
