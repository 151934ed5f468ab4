"""Lazy public APIs for capbook's subpackages (PEP 562).

Each subpackage's ``__init__`` lists its public names and the module that defines each, and
calls :func:`attach`. A name's module is imported on first use, so ``import capbook.plan``
costs nothing until a name of it is used, and ``capbook --help`` loads no pandas, duckdb,
scipy or altair.

Examples
--------
>>> import capbook.plan
>>> capbook.plan.capacity_plan is capbook.plan.steps.capacity_plan
True
"""
from __future__ import annotations

import importlib


def attach(package: str, table: dict[str, list[str]]):
    """``__getattr__``, ``__dir__`` and ``__all__`` for ``package``.

    Parameters
    ----------
    package : str
        The subpackage's ``__name__``.
    table : dict
        Module name (relative to ``package``) -> the public names it defines.

    Returns
    -------
    tuple
        ``(__getattr__, __dir__, __all__)``, to assign in the package's ``__init__``.
    """
    owner = {name: module for module, names in table.items() for name in names}
    if len(owner) != sum(len(v) for v in table.values()):
        seen: set = set()
        twice = sorted(n for v in table.values() for n in v if n in seen or seen.add(n))
        raise ValueError(f"{package}: names listed under two modules: {twice}")
    public = sorted(owner) + sorted(table)

    def __getattr__(name: str):
        pkg = importlib.import_module(package)
        if name in owner:
            value = getattr(importlib.import_module(f"{package}.{owner[name]}"), name)
        elif name in table:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(pkg, name, value)  # later lookups skip this function
        return value

    def __dir__() -> list[str]:
        return sorted(set(public) | set(vars(importlib.import_module(package))))

    return __getattr__, __dir__, sorted(owner)
