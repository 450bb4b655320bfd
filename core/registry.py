"""Names that stand for code, resolved in one place: a "module:attr" target, and the short names that
installed packages register under an entry-point group (the mechanism xarray uses for its backends).

Three tables use it: the model families (`core/family.py`, group ``seqphase.models``: each entry point
names a `Family`, whose models are "module:Class" targets), the cluster backends (`cluster/base.py`,
built-in targets only) and the user plug-ins (`core/plugins.py`, groups ``seqphase.channels`` and
``seqphase.priors``). Nothing is imported until a name is looked up, so ``import seqphase`` stays light.

One error style: every failure is the caller's `SeqphaseError` subclass (`error`) naming the field that
holds the name (`where`), what is wrong and the fix, on one line. A short name that two installed
distributions register is an error naming both. This module imports no family.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib import metadata

from seqphase.core.errors import ParameterError

#: the fix of a target that cannot be imported
IMPORT_FIX = ("run from the folder that holds the module, or put it on PYTHONPATH (on the driver and every "
              "worker)")


def split_target(target, where, error=ParameterError, example="mypackage.channels:Probit"):
    """(module, attribute path) of a "module:attr" name, or `error` naming `where` when it is malformed."""
    module_name, _, attr = str(target).partition(":")
    if not module_name or not attr or module_name.startswith(".") or not all(
            part.isidentifier() for part in module_name.split(".") + attr.split(".")):
        raise error(where, f"{target!r} is not a 'module:Class' name", f"write e.g. \"{example}\"")
    return module_name, attr


def resolve(target, where, *, error=ParameterError, what="", fix=IMPORT_FIX, example="mypackage.channels:Probit"):
    """The object "module:attr" names, imported now. A malformed name or a failed import (whatever the
    module raises) is `error` naming `where`; `what` ("user model ") prefixes the name in the message."""
    module_name, attr = split_target(target, where, error, example)
    try:
        obj = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as exc:  # noqa: BLE001 -- a user's module may raise anything on import
        raise error(where, f"cannot import {what}{target!r} ({type(exc).__name__}: {exc})", fix) from None
    return obj


@dataclass(frozen=True)
class Registered:
    """A short name an installed distribution registers: the target it stands for and who registers it."""

    name: str
    target: str        # "module:attr"
    distribution: str  # the registering distribution's name ("" when unknown)

    def describe(self):
        return f"{self.target} (from {self.distribution or 'an unnamed distribution'})"


def entry_points(group, what, where, error=ParameterError):
    """{short name: Registered} of the entry-point group `group`, read from the installed distributions'
    metadata now (a package installed since is seen). A name that two distributions register is `error`
    naming `where`, the group and both; the same distribution found twice on the path counts once."""
    found = {}
    for point in metadata.entry_points(group=group):
        distribution = point.dist.name if getattr(point, "dist", None) is not None else ""
        entry = Registered(point.name, point.value, distribution)
        seen = found.get(point.name)
        if seen is not None and seen != entry:
            raise error(where, f"two distributions register the {what} {point.name!r} (entry-point group "
                        f"{group!r}): {seen.describe()} and {entry.describe()}", "uninstall one of them")
        found[point.name] = entry
    return found
