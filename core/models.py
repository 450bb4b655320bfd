"""The model registry and the contract every model follows: what a sweep can name, which parameters it
takes, and what it returns.

A *model* is a table: its physical parameters and its methods.

- `params`: the physical parameters with their valid ranges (alpha, rho, delta, ...). Every parameter
  becomes a labelled dimension of the stored dataset, so a changed value is a new point, never an
  overwrite.
- `methods`: name -> a `Method` object ("se", "gamp", "threshold", ...), subclassed once per method in
  the family's core/<family>/model.py. It carries its settings with defaults and ranges, an algorithm
  version (bump it when results change, so stored points computed by the old code are recomputed),
  optional extra grid axes (e.g. the `transition` of a threshold sweep), and its code:
  `layout(settings)` (the variables a point returns and their extra dims — seed, iteration, the p x p
  `row`/`col`, ... — known before anything runs, so the store writes its template once),
  `run(params, settings, seed_sequence)` (one point; pure numpy, no I/O) and `figure(...)`.
- `check_point(method, params)`: relations between the parameters of one point.
`Model.layout`, `Model.run` and `Model.figure` only look the method up, so a new family writes no
dispatch on method names.

Conventions used by every model (stated once here):
  alpha = n/d (samples per dimension); rho = E[x^2] of the prior (Gauss-Bernoulli: density of
  non-zeros); delta = variance of additive Gaussian label noise; overlap m = x_hat . x* / d; mse = E
  (x_hat - x*)^2 per component; gen_error = test error of a new label (classification error for sign
  outputs, squared error otherwise).

The registry `MODELS` maps a name to "module:Class" and imports the family only when asked for it; a
user model outside the package is named the same way ("package.module:ClassName") in a spec; it must
subclass `Model` and be importable on the workers.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from seqphase.core.errors import ParameterError

REQUIRED = object()


@dataclass(frozen=True)
class Param:
    """A named scalar (or list, for `kind="choices"`) with a type and a valid range.

    kind: "float", "int", "bool", "choice" (one of `choices`), "choices" (a list of `choices`).
    Bounds: `low`/`high`, open unless `low_inclusive`/`high_inclusive`.
    """

    name: str
    kind: str
    doc: str
    default: object = REQUIRED
    choices: tuple = ()
    low: float | None = None
    high: float | None = None
    low_inclusive: bool = False
    high_inclusive: bool = True

    def range_text(self):
        if self.kind in ("choice", "choices"):
            return "one of " + ", ".join(repr(c) for c in self.choices)
        parts = []
        if self.low is not None:
            parts.append(f"{self.name} {'>=' if self.low_inclusive else '>'} {self.low:g}")
        if self.high is not None:
            parts.append(f"{self.name} {'<=' if self.high_inclusive else '<'} {self.high:g}")
        return " and ".join(parts) if parts else f"any {self.kind}"

    def normalise(self, value, where):
        """Return the value in canonical form, or raise ParameterError naming `where`."""
        if self.kind == "choices":
            values = [value] if isinstance(value, str) else value
            if not isinstance(values, (list, tuple)) or not values:
                raise ParameterError(where, f"expected a list of {self.range_text()}, got {value!r}")
            for v in values:
                if v not in self.choices:
                    raise ParameterError(where, f"{v!r} is not valid", f"use {self.range_text()}")
            return list(values)
        if self.kind == "choice":
            if value not in self.choices:
                raise ParameterError(where, f"{value!r} is not valid", f"use {self.range_text()}")
            return value
        if self.kind == "bool":
            if not isinstance(value, bool):
                raise ParameterError(where, f"expected true or false, got {value!r}")
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ParameterError(where, f"expected a number, got {value!r}", f"use {self.range_text()}")
        if self.kind == "int":
            if float(value) != int(value):
                raise ParameterError(where, f"expected an integer, got {value!r}")
            value = int(value)
        else:
            value = canonical_float(value)
            if not math.isfinite(value):
                raise ParameterError(where, f"{value!r} is not finite", f"use {self.range_text()}")
        bad_low = self.low is not None and (value < self.low or (value == self.low and not self.low_inclusive))
        bad_high = self.high is not None and (value > self.high or (value == self.high and not self.high_inclusive))
        if bad_low or bad_high:
            raise ParameterError(where, f"value {value!r} is out of range", f"use {self.range_text()}")
        return value


def canonical_float(value):
    """Round to 12 significant digits, so 0.1 from a linspace and 0.1 typed by hand are one point."""
    return float(f"{float(value):.12g}")


@dataclass(frozen=True)
class Variable:
    """One output of a point: its extra dims (beyond the point's grid dims), dtype and meaning; optionally
    a short `long_name` (default: the doc's first clause) and CF `units` (default "1", dimensionless)."""

    dims: tuple
    dtype: str
    doc: str
    units: str = ""
    long_name: str = ""


@dataclass
class Layout:
    """What a point returns: coordinates of the extra dims and the variables."""

    extra_dims: dict
    variables: dict


@dataclass
class Method:
    """A method of a model ("se", "gamp", "threshold", ...): its settings, algorithm version, the grid
    axes it adds, and the code of one point.

    A family's model.py subclasses it once per method and implements `layout` (what a point returns,
    known before anything runs) and `run` (compute one point; numpy only); `figure` draws a stored
    sweep of the method (the default is the generic figure of `core/figures.py`). `Model.layout`,
    `Model.run` and `Model.figure` only look the method up and delegate, so a model is a table of
    parameters and methods.
    """

    settings: dict
    version: int
    doc: str
    axes: dict = field(default_factory=dict)  # grid dim -> setting of kind "choices" that spans it
    excludes: tuple = ()  # model params the method does not take (a threshold method computes alpha)
    name: str = ""  # set by the Model from its methods table

    def check(self, params, settings):
        """Validate a point against the method's settings before anything runs (e.g. a dimension d too
        small for the point's width); raise ParameterError. Called by the spec for every point."""

    def layout(self, settings):  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} does not define layout()")

    def run(self, params, settings, seed_sequence):  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} does not define run()")

    def figure(self, plt, ds, companions):
        """The Figure of a stored sweep of this method (`ds` masked to the done points)."""
        from seqphase.core import figures

        return figures.generic(plt, ds, self.name, companions)


@dataclass
class Model:
    """Base class of a model family (see the module docstring for the contract)."""

    name: str = ""
    description: str = ""
    params: dict = field(default_factory=dict)
    methods: dict = field(default_factory=dict)

    # -- validation -----------------------------------------------------------------------------
    def method(self, method):
        if method not in self.methods:
            raise ParameterError(
                "method.name", f"model {self.name!r} has no method {method!r}",
                f"use one of {', '.join(self.methods)}")
        return self.methods[method]

    def param_names(self, method):
        excluded = self.method(method).excludes
        return [p for p in self.params if p not in excluded]

    def check_value(self, method, name, value, where=None):
        where = where or f"params.{name}"
        if name in self.method(method).excludes:
            raise ParameterError(where, f"not used by method {method!r}", f"remove {name} from the spec")
        if name not in self.params:
            raise ParameterError(
                where, f"model {self.name!r} has no parameter {name!r}",
                f"use one of {', '.join(self.param_names(method))}")
        return self.params[name].normalise(value, where)

    def check_point(self, method, params):
        """Validate relations between parameters of one point (override in a model)."""
        return params

    def check_settings(self, method, settings, where="method"):
        spec = self.method(method).settings
        out = {}
        for key, value in settings.items():
            if key not in spec:
                raise ParameterError(
                    f"{where}.{key}", f"method {method!r} has no setting {key!r}",
                    f"use one of {', '.join(spec)}")
            out[key] = spec[key].normalise(value, f"{where}.{key}")
        for key, param in spec.items():
            if key not in out:
                out[key] = list(param.default) if isinstance(param.default, (list, tuple)) else param.default
        return out

    def defaults(self, method):
        return {name: self.params[name].default for name in self.param_names(method)
                if self.params[name].default is not REQUIRED}

    def method_axes(self, method, settings):
        """Extra grid dims a method adds, e.g. {"transition": ["weak", "perfect"]}."""
        return {dim: list(settings[setting]) for dim, setting in self.method(method).axes.items()}

    def algorithm_version(self, method):
        return f"{self.name}/{method}/v{self.method(method).version}"

    def __post_init__(self):
        for name, method in self.methods.items():
            method.name = method.name or name

    # -- generic: delegate to the method object -------------------------------------------------
    def layout(self, method, settings):
        return self.method(method).layout(settings)

    def run(self, method, params, settings, seed_sequence):
        return self.method(method).run(params, settings, seed_sequence)

    def figure(self, method, plt, ds, companions=None):
        return self.method(method).figure(plt, ds, companions or {})


#: The registry: model name -> "module:Class". Looked up by name only when a model is asked for, so
#: `import seqphase` stays light, a broken optional model cannot break the CLI, and no module of a
#: family is imported by this one (no import loop). A user model is named the same way in a spec.
MODELS = {
    "glm": "seqphase.core.glm.model:GLMModel",
    "multiindex": "seqphase.core.multiindex.model:MultiIndexModel",
    "smi": "seqphase.core.smi.model:SMIModel",
    "aim": "seqphase.core.aim.model:AIMModel",
    "quadratic": "seqphase.core.quadratic.model:QuadraticModel",
    "quadratic-erm": "seqphase.core.quadratic.model:QuadraticERMModel",
    "bsr": "seqphase.core.bsr.model:BSRModel",
}


def model_names():
    return sorted(MODELS)


@lru_cache(maxsize=None)
def _load(target):
    module_name, _, class_name = target.partition(":")
    return getattr(importlib.import_module(module_name), class_name)


def get_model(name):
    """Look a model up by registry name, or import a user model given as "module:ClassName"."""
    if name in MODELS:
        return _load(MODELS[name])()
    if ":" in name:
        try:
            cls = _load(name)
        except (ImportError, AttributeError) as exc:
            raise ParameterError("model", f"cannot import user model {name!r}: {exc}",
                                 "make the module importable (PYTHONPATH) on the driver and the workers")
        if not (isinstance(cls, type) and issubclass(cls, Model)):
            raise ParameterError("model", f"{name!r} is not a seqphase.core.models.Model subclass")
        return cls()
    raise ParameterError("model", f"unknown model {name!r}",
                         f"use one of {', '.join(sorted(MODELS))} or 'module:ClassName'")


def run_point(model_name, method, params, settings, seed_entropy, seed_key):
    """Compute one point (the function a worker runs). Returns {variable: numpy array}.

    The random stream of the point is SeedSequence(seed_entropy, spawn_key=seed_key): a function of
    the spec's seed and of the point's physical parameters only, so reruns draw the same instances.
    """
    model = get_model(model_name)
    seed_sequence = np.random.SeedSequence(seed_entropy, spawn_key=tuple(seed_key))
    out = model.run(method, dict(params), dict(settings), seed_sequence)
    layout = model.layout(method, settings)
    missing = set(layout.variables) - set(out)
    if missing:
        raise RuntimeError(f"model {model_name!r} did not return {sorted(missing)}")
    result = {}
    for name, var in layout.variables.items():
        shape = tuple(len(layout.extra_dims[d]) for d in var.dims)
        value = np.asarray(out[name])
        if value.shape != shape:
            raise RuntimeError(f"model {model_name!r} returned {name} with shape {value.shape}, layout says {shape}")
        result[name] = value.astype(var.dtype)
    return result
