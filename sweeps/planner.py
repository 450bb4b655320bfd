"""The planner: a validated `Sweep` becomes a list of `Point`s, each with a stable identity.

Grid dims are every model parameter (fixed ones have one value), then the method settings given several
values (e.g. `d`: a finite-size axis), then the method's own axes (e.g. `transition`). A point's hash is the SHA-256 of the canonical JSON of everything that determines
its result: model, method, settings, spec seed, the point's parameters and the algorithm version. It is
the point's Dask key and its entry in the store's ledger, so a rerun skips exactly the points whose
hash is already marked done; changing any of these creates a different point.

A point's random stream is SeedSequence(spec seed, spawn_key = words of the hash of its *physical*
parameters), so a code-version bump recomputes a point on the same instances.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field

from seqphase.core.models import get_model
from seqphase.sweeps.limits import check_count, grid_size
from seqphase.sweeps.spec import canonical_json


@dataclass(frozen=True)
class Point:
    coords: tuple          # ((dim, value), ...) in grid-dim order
    hash: str
    seed_key: tuple        # spawn_key of the point's SeedSequence

    @property
    def params(self):
        return dict(self.coords)


@dataclass
class Plan:
    """Everything the driver and the store need: identity, grid, points and output layout."""

    sweep: object
    model: object
    dims: list
    coords: dict
    points: list
    layout: object
    identity: dict
    plugins: list = field(default_factory=list)  # provenance of the user plug-ins the grid names

    @property
    def identity_hash(self):
        return sha256(canonical_json(self.identity))

    def point_inputs(self, point):
        """(params, settings) a point's method runs with: its settings take the point's values of the
        setting axes; its params are the rest of its coordinates."""
        axes = self.sweep.setting_axes
        if not axes:
            return point.params, self.sweep.settings
        coords = point.params
        return ({k: v for k, v in coords.items() if k not in axes},
                {**self.sweep.settings, **{k: coords[k] for k in axes}})


def sha256(text):
    return hashlib.sha256(text.encode()).hexdigest()


def sweep_identity(sweep, method=None):
    """What must agree for two runs to share one store group (the grid itself may grow: a setting axis's
    values are grid values, so only its name is part of the identity). `method` (the sweep's `Method`) leaves
    its `later_settings` out while they are at their defaults."""
    settings = sweep.settings if method is None else method.identity_settings(sweep.settings)
    if not sweep.setting_axes:  # (the identity, and so every point hash, of sweeps without setting axes)
        return {"model": sweep.model, "method": sweep.method, "settings": settings, "seed": sweep.seed}
    settings = {k: v for k, v in settings.items() if k not in sweep.setting_axes}
    return {"model": sweep.model, "method": sweep.method, "settings": settings, "seed": sweep.seed,
            "setting_axes": sorted(sweep.setting_axes)}


def point_hash(identity, params, algorithm_version):
    return sha256(canonical_json({"identity": identity, "params": params, "algorithm": algorithm_version}))


def seed_key(params):
    """Four 32-bit words from the hash of the physical parameters of a point."""
    digest = hashlib.sha256(canonical_json(params).encode()).digest()
    return tuple(int.from_bytes(digest[4 * k: 4 * k + 4], "little") for k in range(4))


def make_point(model, identity, dims, values):
    coords = tuple(zip(dims, values))
    params = dict(coords)
    version = model.point_version(identity["method"], params)
    return Point(coords=coords, hash=point_hash(identity, params, version), seed_key=seed_key(params))


def plan_sweep(sweep):
    model = get_model(sweep.model).specialise(sweep.method, sweep.params)
    coords = {name: list(sweep.params[name]) for name in model.param_names(sweep.method)}
    coords.update({name: list(values) for name, values in sweep.setting_axes.items()})
    coords.update(model.method_axes(sweep.method, sweep.settings))
    dims = list(coords)
    check_count(grid_size(len(coords[d]) for d in dims), "params")  # before a point is made
    identity = sweep_identity(sweep, model.method(sweep.method))
    points = [make_point(model, identity, dims, values)
              for values in itertools.product(*(coords[d] for d in dims))]
    layout = model.layout(sweep.method, sweep.settings)
    return Plan(sweep=sweep, model=model, dims=dims, coords=coords, points=points, layout=layout,
                identity=identity, plugins=[info.provenance() for info in model.plugins_of(sweep.params)])


def payload(plan, point):
    """What a worker needs to compute a point: plain data, no objects from the driver."""
    params, settings = plan.point_inputs(point)
    return {"model": plan.sweep.model, "method": plan.sweep.method, "params": params,
            "settings": settings, "seed_entropy": plan.sweep.seed, "seed_key": point.seed_key,
            "hash": point.hash}


