"""Model families: each is a package that registers itself under the entry-point group ``seqphase.models``
(as xarray's backends register under theirs), naming a `Family` object:

    [project.entry-points."seqphase.models"]
    glm = "seqphase.core.glm:FAMILY"

seqphase's own families are declared so in its pyproject.toml; a family of your own is a package with the
same line in its pyproject.toml (examples/toy-family/). The `Family` names its models ("module:Class") and
where its files and code are: its sweep specs and published data (folders of the package, read by the
loader `seqphase.sweeps.families`), its `Paper` entries and its agreement checks ("module:attr"). It holds
names only, so finding the families imports each family's package (its light __init__) and nothing more;
a model's module is imported when the model is asked for.

A family whose entry point cannot be loaded (its package broken, or not naming a `Family`) is left out with
a one-line note (`broken`, printed by `seqphase list`): a broken third-party family never breaks the command
line. Two families of one name, or one model name in two families, is an error naming both.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from seqphase.core import registry
from seqphase.core.errors import SeqphaseError

GROUP = "seqphase.models"


@dataclass(frozen=True)
class Family:
    """A model family, as its package registers it (its name is the entry point's).

    Parameters
    ----------
    models : dict
        Model name -> "module:Class" (a `seqphase.core.models.Model` subclass); a spec names the model by it.
    package : str
        The package that holds the family's files (read through `importlib.resources`, so from a wheel too).
    sweeps : str
        The folder of `package` that holds its sweep specs (``*.toml``, shipped under the file's name).
    reference : str
        The folder of `package` that holds its published data (CSV files with a header row).
    papers : str, optional
        "module:attr" of its `seqphase.sweeps.papers.Paper` entries (a tuple); by default
        ``<package>.papers:PAPERS``, "" for none.
    checks : str, optional
        "module:attr" of its agreement checks, {paper id: check(results, reference) -> [Row]}: `results` maps a
        run's name to its stored Dataset, `reference` a published file's name to its columns (no file I/O); by
        default ``<package>.checks:CHECKS``, "" for none.
    name : str
        The family's name: its entry point's, set when the families are found.
    """

    models: dict
    package: str
    sweeps: str = "sweeps"
    reference: str = "reference"
    papers: str | None = None
    checks: str | None = None
    name: str = field(default="", compare=False)

    def __post_init__(self):
        # the layout every shipped family follows names its papers and checks; a family may name others, or ""
        for attr, where in (("papers", "papers:PAPERS"), ("checks", "checks:CHECKS")):
            if getattr(self, attr) is None:
                object.__setattr__(self, attr, f"{self.package}.{where}")


@dataclass(frozen=True)
class Families:
    """The registered families: {name: Family}, {model name: family name}, and the one-line notes of the
    entry points that could not be loaded."""

    by_name: dict
    model_family: dict
    broken: tuple


@functools.lru_cache(maxsize=None)
def _families():
    by_name, model_family, broken = {}, {}, []
    for name, entry in sorted(registry.entry_points(GROUP, "model family", GROUP, SeqphaseError).items()):
        by = f"registered by {entry.distribution or 'an unnamed distribution'}"
        try:
            family = registry.resolve(entry.target, f"model family {name!r}", error=SeqphaseError)
        except SeqphaseError as exc:
            broken.append(f"model family {name!r}: {exc.message} ({by})")
            continue
        if not isinstance(family, Family):
            broken.append(f"model family {name!r}: {entry.target} is not a seqphase.core.family.Family ({by})")
            continue
        for model in family.models:
            if model in model_family:
                raise SeqphaseError("model", f"model {model!r} is registered by two families: {model_family[model]!r} "
                                    f"({by_name[model_family[model]].models[model]}) and {name!r} "
                                    f"({family.models[model]})", "uninstall one of them")
            model_family[model] = name
        by_name[name] = replace(family, name=name)
    if not by_name and not broken:
        raise SeqphaseError("model", f"no model family is registered under the entry-point group {GROUP!r}",
                            "install seqphase (pip install -e . in a checkout): its families are entry points")
    return Families(by_name, model_family, tuple(broken))


def families():
    """{name: Family} of the installed families, in name order (found once per process)."""
    return _families().by_name


def broken():
    """One line per registered family that could not be loaded (left out of `families`)."""
    return _families().broken


def model_targets():
    """{model name: "module:Class"} of every registered family's models."""
    return {model: target for family in families().values() for model, target in family.models.items()}


def family_of_model(model):
    """The Family that registers `model`, or None (a user model named "module:Class", or an unknown name)."""
    name = _families().model_family.get(model)
    return None if name is None else families()[name]
