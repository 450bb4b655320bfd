"""Figures of a stored sweep, as PNG: open, mask to the done points, ask the model, save.

The drawing itself belongs to the model: `Model.figure(method, ...)` delegates to the method object,
whose default is the generic figure of `core/figures.py` (SE lines, GAMP points on the SE line,
thresholds two ways) and which a family overrides in its `core/<family>/figures.py` (deep tied
attention draws the paper's figures there). The figure receives the companion sweeps and, under
`figures.REFERENCE`, the published data of the model's family (read by `seqphase.sweeps.families`). This
module holds no model's code. A user model
("module:Class") is imported only when asked (`seqphase plot --import-model`): the model a store names is
data, not code to run. Without it the sweep gets the generic figure of its method.
"""

from __future__ import annotations

import textwrap

import numpy as np

from seqphase.core import figures
from seqphase.core.errors import SeqphaseError
from seqphase.core.models import get_model, registered_models
from seqphase.results.store import DONE, STATUS_NAMES
from seqphase.sweeps.families import reference_of_model


def plot_sweep(ds, path, companions=None, import_model=False):
    """Draw `ds` to `path`. `companions` maps a role to another sweep's Dataset: the `[plot]` table of
    a spec may name `se_sweep` (a GAMP spec: its dense SE curve is drawn under the GAMP points) and, for
    the models that use them, other `*_sweep` roles (see `core/smi/figures.py`). Companions are masked to their done points too."""
    plt = _pyplot()
    fig = make_figure(ds, companions, import_model=import_model)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def make_figure(ds, companions=None, import_model=False):
    """The Figure of a stored sweep (not saved). A sweep with no finished point is a SeqphaseError.
    `import_model`: a user model named by the store ("module:Class") is imported to draw its own figure
    (`seqphase plot --import-model`); without it only shipped models draw theirs."""
    plt = _pyplot()
    _require_done(ds)
    model_name, method = ds.attrs.get("model"), ds.attrs.get("method")
    ds = ds.where(ds["status"] == DONE)
    companions = {role: done_only(other) for role, other in (companions or {}).items()}
    companions[figures.REFERENCE] = reference_of_model(model_name)  # the family's published data (files: the loader)
    # Only a shipped model draws its own figure unless asked: the model a store names is data, and importing
    # the module it names would run code chosen by whoever wrote the store. Other models: the generic figure.
    model = None
    if model_name in registered_models():
        model = get_model(model_name)
    elif import_model and isinstance(model_name, str):
        try:
            model = get_model(model_name)
        except SeqphaseError:  # a user model not importable here: the generic figure of its method
            model = None
    if model is not None:
        fig = model.figure(method, plt, ds, companions)
    else:
        try:
            fig = figures.generic(plt, ds, method, companions)
        except KeyError as exc:  # the generic figure of a method names variables this sweep does not have
            raise SeqphaseError(ds.attrs.get("seqphase_sweep", "SWEEP"), f"no generic figure of method {method!r} "
                                f"for model {model_name!r} (it draws variables this sweep lacks: {exc})",
                                "read the values with seqphase query and draw them yourself") from None
    title = ds.attrs.get("title", ds.attrs.get("seqphase_sweep", "")) + run_size_note(ds)
    width = fig.get_size_inches()[0]
    fig.suptitle(textwrap.fill(title, max(40, int(width * 13))), fontsize=10)
    if fig.get_layout_engine() is None:  # a figure made with constrained layout keeps it (and places the title)
        fig.tight_layout()
    return fig


def run_size_note(ds):
    """What the stored run changed from its spec (`--set` overrides, e.g. a `reproduce --quick` grid), as a
    suffix of the figure title, so that a title written for the spec's size never stands for a smaller run:
    "" when the run is the spec as written. A long list is shown by its length."""
    import json

    try:
        overrides = json.loads(ds.attrs.get("spec_resolved", "{}")).get("overrides", [])
    except ValueError:
        return ""
    shown = []
    for item in overrides:
        key, _, value = item.partition("=")
        count = len(value.split(","))
        shown.append(f"{key} = {count} values" if count > 6 else f"{key} = {value}")
    return f" [as run: {'; '.join(shown)}]" if shown else ""


def done_only(ds):
    """The Dataset with every point that is not done masked out (status NaN there): what a model's
    figure receives, for the sweep and for each companion."""
    return ds.where(ds["status"] == DONE)


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _require_done(ds):
    status = np.asarray(ds["status"].values)
    if (status == DONE).any():
        return
    name = ds.attrs.get("seqphase_sweep", "SWEEP")
    counts = ", ".join(f"{int((status == code).sum())} {STATUS_NAMES[code]}"
                       for code in sorted(STATUS_NAMES) if (status == code).any())
    raise SeqphaseError(name, f"no finished point to plot ({counts})",
                        f"run it first (seqphase run {name}), then plot")


