"""The one loader of the model families' files: their sweep specs and their published data, read through
`importlib.resources` from each family's package (`Family.package`), so from a checkout, an editable
install or a wheel alike. core/ reads no file: a family's figures and agreement checks receive the
published data from here (`reference`).

- `sweep_files()`: {sweep name: path} of every registered family's specs (`Family.sweeps`, ``*.toml``; the
  name is the file's); a sweep name two families ship is an error naming both.
- `reference(family)`: a family's published data (`Family.reference`), a mapping {file name: columns}, each
  file read when asked for; `published_columns(family, name)` one file's columns.
"""

from __future__ import annotations

import csv
import functools
from collections.abc import Mapping
from importlib import resources
from pathlib import Path

import numpy as np

from seqphase.core.errors import SeqphaseError
from seqphase.core.family import families, family_of_model


def _folder(family, folder):
    """The Traversable of a folder of a family's package, or None when the family has none."""
    if not folder:
        return None
    entry = resources.files(family.package).joinpath(folder)
    return entry if entry.is_dir() else None


def sweep_files():
    """{sweep name: path} of the sweep specs every registered family ships (`seqphase list`)."""
    found, owner = {}, {}
    for family in families().values():
        folder = _folder(family, family.sweeps)
        if folder is None:
            continue
        for entry in folder.iterdir():
            if not entry.name.endswith(".toml"):
                continue
            name = entry.name[: -len(".toml")]
            if name in found:
                raise SeqphaseError("SWEEP", f"sweep {name!r} is shipped by two families: {owner[name]!r} and "
                                    f"{family.name!r}", "uninstall one of them")
            found[name], owner[name] = Path(str(entry)), family.name
    return found


def read_columns(handle):
    """The columns of a CSV with a header row, as float arrays; an unnamed column (a pandas index) is dropped."""
    rows = list(csv.reader(handle))
    header, body = rows[0], np.array(rows[1:], dtype=float)
    return {column: body[:, k] for k, column in enumerate(header) if column}


class Reference(Mapping):
    """A family's published data: {file name: {column: float array}} of the CSV files of its reference
    folder, each read when asked for (fresh arrays each time). A file it does not hold is a SeqphaseError
    naming it."""

    def __init__(self, family):
        self.family = family

    def _entry(self, name):
        folder = _folder(self.family, self.family.reference)
        return None if folder is None else folder.joinpath(name)

    def __getitem__(self, name):
        entry = self._entry(name)
        try:
            if entry is None:
                raise FileNotFoundError(name)
            with entry.open("r", newline="") as handle:
                return read_columns(handle)
        except FileNotFoundError:
            raise SeqphaseError("/".join(part for part in (self.family.package, self.family.reference, name) if part),
                                "published data file missing from this installation",
                                "reinstall the family's package with its package data (pip install .)") from None

    def __iter__(self):
        folder = _folder(self.family, self.family.reference)
        names = [] if folder is None else sorted(e.name for e in folder.iterdir() if e.name.endswith(".csv"))
        return iter(names)

    def __len__(self):
        return sum(1 for _ in self)


@functools.lru_cache(maxsize=None)
def reference(family_name):
    """The published data of the registered family `family_name` (a `Reference`)."""
    if family_name not in families():
        raise SeqphaseError("family", f"no model family {family_name!r}", f"use one of {', '.join(families())}")
    return Reference(families()[family_name])


def reference_of_model(model):
    """The published data of the family that registers `model`; an empty mapping for a model of no family."""
    family = family_of_model(model) if isinstance(model, str) else None
    return {} if family is None else reference(family.name)


def published_columns(family_name, name):
    """The columns of the published file `name` of a family, as float arrays."""
    return reference(family_name)[name]
