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

A model is named in a spec by the name its family registers (`registered_models`: the installed families
of `core/family.py`, each model a "module:Class" imported only when asked for); a user model outside any
family is named by its "package.module:ClassName"; it must subclass `Model` and be importable on the
workers.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from seqphase.core import family, plugins, registry
from seqphase.core.errors import ParameterError

REQUIRED = object()
LIST_KINDS = ("floats", "ints")  # settings whose value is a list of numbers


@dataclass(frozen=True)
class Param:
    """A named scalar (or list, for `kind="choices"`) with a type and a valid range.

    kind: "float", "int", "bool", "choice" (one of `choices`), "choices" (a list of `choices`), "floats" /
    "ints" (a list of numbers, each in the bounds: e.g. the sizes d of a finite-size method; a list, so
    never a grid axis). Bounds: `low`/`high`, open unless `low_inclusive`/`high_inclusive`.
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
    plugin: str = ""  # "channel" / "prior": a value may also name a user plug-in (core/plugins.py)

    def range_text(self):
        if self.kind in ("choice", "choices"):
            return "one of " + ", ".join(repr(c) for c in self.choices)
        parts = []
        if self.low is not None:
            parts.append(f"{self.name} {'>=' if self.low_inclusive else '>'} {self.low:g}")
        if self.high is not None:
            parts.append(f"{self.name} {'<=' if self.high_inclusive else '<'} {self.high:g}")
        return " and ".join(parts) if parts else f"any {self.kind}"

    def names_plugin(self, value):
        """True when `value` of this parameter names a user plug-in ("module:Class" or a short name an
        installed package registers), not one of its shipped choices."""
        return bool(self.plugin) and isinstance(value, str) and value not in self.choices and (
            ":" in value or value in plugins.entry_point_names(self.plugin))

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
        if self.kind in LIST_KINDS:
            if not isinstance(value, (list, tuple)) or not value:
                raise ParameterError(where, f"expected a list of numbers, got {value!r}", f"use {self.range_text()}")
            scalar = Param(self.name, self.kind[:-1], self.doc, low=self.low, high=self.high,
                           low_inclusive=self.low_inclusive, high_inclusive=self.high_inclusive)
            values = [scalar.normalise(v, where) for v in value]
            if len(set(values)) != len(values):
                raise ParameterError(where, f"repeated values in {value!r}", "list each value once")
            return values
        if self.kind == "choice":
            if value in self.choices:
                return value
            if self.names_plugin(value):
                plugins.load(value, self.plugin, where)  # importable and a Likelihood / Prior: checked now
                return value
            fix = f"use {self.range_text()}" + (" or a plug-in \"module:Class\"" if self.plugin else "")
            raise ParameterError(where, f"{value!r} is not valid", fix)
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


#: the switch of a family's closed forms, shared by the families whose channels and priors are
#: `seqphase.Likelihood` / `seqphase.Prior` objects: with it, a shipped channel (and prior) runs as a user's
#: does, everything derived from the likelihood (and the density). Out of a sweep's identity at its default
#: (list it in the method's `later_settings`).
DERIVED_SETTING = Param("derived", "bool", "derive the channel's and the prior's quantities from their "
                        "likelihood and density (closed forms off)", False)


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


@dataclass(frozen=True)
class Work:
    """One task of a point: `fn(**kwargs)`, run on a worker. `key` names it within the point ("seed-3",
    "shared", "probe-2-1") and is the same on every run of the point, so a resumed point reuses the
    works that finished before (the driver keeps their results until the point is stored). `fn` is a
    module-level function or a bound method of a Method (both pickle by reference); `kwargs` plain data."""

    key: str
    fn: object
    kwargs: dict


def drive(tasks, execute=None):
    """Run a point's task generator (`Method.tasks`) to its end in this process: each yielded list of
    Works is executed (by `execute(work)`, default `work.fn(**work.kwargs)`), the results are sent
    back as {key: result}, and the generator's return value (the point's outputs) is returned. The
    serial `run` of a method with tasks, and the reference the driver's distributed execution must
    equal bit for bit."""
    execute = execute or (lambda work: work.fn(**work.kwargs))
    try:
        works = next(tasks)
        while True:
            works = tasks.send({work.key: execute(work) for work in works})
    except StopIteration as stop:
        return stop.value


def children(seed_sequence, k, start=0):
    """Children `start .. start + k - 1` of a SeedSequence by spawn key (entropy, key + (i,)): what
    `spawn(k)` returns on a fresh sequence, but independent of how often the sequence was spawned
    before, so seed s is the same stream whether it runs alone on a worker or in a loop."""
    return [np.random.SeedSequence(seed_sequence.entropy, spawn_key=tuple(seed_sequence.spawn_key) + (i,),
                                   pool_size=seed_sequence.pool_size) for i in range(start, start + k)]


@dataclass
class Method:
    """A method of a model ("se", "gamp", "threshold", ...): its settings, algorithm version, the grid
    axes it adds, and the code of one point.

    A family's model.py subclasses it once per method and implements `layout` (what a point returns,
    known before anything runs) and `run` (compute one point; numpy only); `figure` draws a stored
    sweep of the method (the default is the generic figure of `core/figures.py`). `Model.layout`,
    `Model.run` and `Model.figure` only look the method up and delegate, so a model is a table of
    parameters and methods.

    Parameters
    ----------
    settings : dict
        Setting name -> `Param` (kind, range, default): what `[method]` of a spec may set.
    version : int
        The algorithm version. It is part of every point's hash: bump it when the stored values would
        change, so that points computed by the old code are recomputed.
    doc : str
        One line: what the method computes.
    axes : dict, optional
        Grid dim -> the setting of kind ``"choices"`` that spans it (e.g. the ``transition`` of a
        threshold search).
    excludes : tuple, optional
        Model parameters the method does not take (a threshold search computes ``alpha``).
    later_settings : tuple, optional
        Settings added after the method's sweeps were stored, whose defaults compute what the method computed
        without them: a sweep's identity (and so every point hash) leaves them out while they are at their
        defaults, so the stored points stay valid; set to another value they enter it.

    Notes
    -----
    The code of a point:

    - ``layout(settings) -> Layout``: the variables a point returns and their extra dims;
    - ``run(params, settings, seed_sequence) -> dict``: one point, every random draw from
      ``seed_sequence`` (a `numpy.random.SeedSequence`);
    - or ``tasks(params, settings, seed_sequence)``: a generator that yields lists of `Work`, receives
      ``{key: result}`` for each list and returns the point's outputs; each Work is its own Dask task
      (`SeededMethod` writes it for independent instances);
    - ``check(params, settings)``: optional validation of one point before anything runs;
    - ``figure(plt, ds, companions)``: optional, the Figure of a stored sweep.
    """

    settings: dict
    version: int
    doc: str
    axes: dict = field(default_factory=dict)  # grid dim -> setting of kind "choices" that spans it
    excludes: tuple = ()  # model params the method does not take (a threshold method computes alpha)
    later_settings: tuple = ()  # settings out of a sweep's identity at their defaults (they reproduce the old points)
    name: str = ""  # set by the Model from its methods table

    def identity_settings(self, settings):
        """The settings that identify a sweep of this method: all but the `later_settings` at their defaults."""
        def default(k):
            value = self.settings[k].default
            return list(value) if isinstance(value, tuple) else value  # as check_settings fills it in

        return {k: v for k, v in settings.items()
                if not (k in self.later_settings and k in self.settings and v == default(k))}

    def check(self, params, settings):
        """Validate a point against the method's settings before anything runs (e.g. a dimension d too
        small for the point's width); raise ParameterError. Called by the spec for every point."""

    def layout(self, settings):  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} does not define layout()")

    def run(self, params, settings, seed_sequence):
        """One point, serially: a method with `tasks` drives its generator in this process (the reference
        the driver's distributed run equals bit for bit); any other method overrides `run`."""
        if self.tasks is None:
            raise NotImplementedError(f"{type(self).__name__} defines neither run() nor tasks()")
        return drive(self.tasks(params, settings, seed_sequence))

    def figure(self, plt, ds, companions):
        """The Figure of a stored sweep of this method (`ds` masked to the done points)."""
        from seqphase.core import figures

        return figures.generic(plt, ds, self.name, companions)

    # A method whose point splits into independent works (seeds, Monte-Carlo blocks, search probes)
    # defines `tasks(params, settings, seed_sequence)`: a generator that yields lists of Works, receives
    # {key: result} for each list, and returns the point's outputs (see SeededMethod). The driver runs
    # the works as separate Dask tasks; `run` drives the same generator serially. None: one task a point.
    tasks = None


class SeededMethod(Method):
    """A method whose point is `settings[seeds]` independent instances ("seeds") plus outputs shared by
    all of them (e.g. the SE prediction at the point). Each seed is its own Work, so a point's seeds run
    on as many workers as there are; `run` executes the same works one after the other, so the stored
    values do not depend on how the point was cut.

    A subclass implements `run_seed(params, settings, stream)` -> {variable: value of this seed} (the
    variables whose first dim is `seed`, without that dim) and, if the point has outputs without a seed
    dim, `run_shared(params, settings, seed_sequence)` -> {variable: value}; a variable without a seed
    dim that `run_shared` does not return is taken from seed 0's result (a quantity every seed computes
    alike, e.g. the epochs at which a training run logs). Seed s draws from child s of the point's
    SeedSequence (`seed_streams`), so seed s is the same instance whatever n_seeds is.
    """

    seeds = "n_seeds"   # the setting that counts the seeds (the length of the `seed` dim)
    shared = False      # True when run_shared returns outputs

    def seed_streams(self, seed_sequence, n):
        return children(seed_sequence, n)

    def check_seed(self, params, settings):
        """Validation repeated by each seed's work (default: `check`)."""
        self.check(params, settings)

    def run_seed(self, params, settings, stream):  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} does not define run_seed()")

    def run_shared(self, params, settings, seed_sequence):
        return {}

    def tasks(self, params, settings, seed_sequence):
        n = settings[self.seeds]
        works = [Work("shared", self.run_shared, {"params": params, "settings": settings,
                                                   "seed_sequence": seed_sequence})] if self.shared else []
        works += [Work(f"seed-{s}", self.run_seed, {"params": params, "settings": settings, "stream": stream})
                  for s, stream in enumerate(self.seed_streams(seed_sequence, n))]
        results = yield works
        return self.assemble(settings, [results[f"seed-{s}"] for s in range(n)], results.get("shared", {}))

    def assemble(self, settings, per_seed, shared):
        """The point's outputs from its seeds' results (stacked along `seed`, in seed order) and the
        shared ones."""
        out = dict(shared)
        for name, var in self.layout(settings).variables.items():
            if var.dims[:1] == ("seed",):
                out[name] = np.stack([np.asarray(result[name]) for result in per_seed])
            elif name not in out:
                out[name] = per_seed[0][name]
        return out


@dataclass
class Model:
    """Base class of a model family: a table of parameters and methods.

    A spec names a model by its registered name (`registered_models`) or, for one of your own, as
    ``"package.module:ClassName"`` (importable on the driver and every worker).

    Parameters
    ----------
    name : str
        The model's name (as the registry knows it).
    description : str
        One line: the model.
    params : dict
        Parameter name -> `Param`. Each parameter becomes a dim of the stored dataset, so a changed
        value is a new point, never an overwrite.
    methods : dict
        Method name ("se", "gamp", ...) -> `Method`.

    Notes
    -----
    ``check_point(method, params)`` may be overridden to check relations between the parameters of one
    point (raise `ParameterError`). `layout`, `run` and `figure` look the method up and delegate to it,
    so a family writes no dispatch on method names.
    """

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

    # -- plug-ins: user channels and priors named by a parameter's value ----------------------------------
    def _named_plugins(self, params):
        """(parameter, value, PluginInfo) of each plug-in that `params` names (a point's values, or a grid's
        lists of values), in parameter order."""
        for name, param in self.params.items():
            if not param.plugin or name not in params:
                continue
            values = params[name] if isinstance(params[name], list) else [params[name]]
            for value in values:
                if param.names_plugin(value):
                    yield name, value, plugins.load(value, param.plugin, f"params.{name}")

    def plugins_of(self, params):
        """[PluginInfo] of the plug-ins a point (or a grid: lists of values) names, in parameter order."""
        return [info for _, _, info in self._named_plugins(params)]

    def point_version(self, method, params):
        """The algorithm version a point's hash carries: the method's, plus the file hash of each plug-in
        the point names (editing a plug-in recomputes its points, as a version bump does)."""
        tags = [info.tag for info in self.plugins_of(params)]
        return "+".join([self.algorithm_version(method)] + tags)

    def specialise(self, method, params):
        """This model with the constructor keywords of the plug-ins that `params` (raw values, lists for
        axes) names added as parameters (a float, int or bool Param each, default the constructor's).
        A keyword named like a model parameter is that parameter (one dim, its range, passed to the
        plug-in), with the plug-in's default."""
        extra = {}
        for name, value, info in self._named_plugins(params):
            for key, default in plugins.parameters(info.cls, f"params.{name}").items():
                if key in extra:
                    continue
                default = REQUIRED if default is plugins.REQUIRED_VALUE else default
                if key in self.params:  # a model parameter the plug-in takes: one dim, the plug-in's default
                    extra[key] = dataclasses.replace(self.params[key], default=default)
                else:
                    kind = "bool" if isinstance(default, bool) else "int" if isinstance(default, int) else "float"
                    extra[key] = Param(key, kind, f"parameter of the plug-in {value} ({name})", default)
        if not extra:
            return self
        special = copy.copy(self)  # a family's Model subclass takes no constructor arguments
        special.params = {**self.params, **extra}
        return special

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

    def tasks(self, method, params, settings, seed_sequence):
        """The point's task generator (Method.tasks), or None when the point is one task."""
        m = self.method(method)
        return None if m.tasks is None else m.tasks(dict(params), dict(settings), seed_sequence)


def registered_models():
    """{model name: "module:Class"} of the installed model families (`core/family.py`: the entry-point group
    ``seqphase.models``). Only names: a family's model module is imported when the model is asked for, so
    `import seqphase` stays light and no module of a family is imported by this one (no import loop)."""
    return family.model_targets()


def model_names():
    return sorted(registered_models())


def get_model(name):
    """Look a model up by its registered name, or import a user model given as "module:ClassName"."""
    targets = registered_models()
    if name in targets:
        return registry.resolve(targets[name], "model")()
    if ":" in name:
        cls = registry.resolve(name, "model", what="user model ", example="mypackage.models:MyModel",
                               fix="make the module importable (PYTHONPATH) on the driver and the workers")
        if not (isinstance(cls, type) and issubclass(cls, Model)):
            raise ParameterError("model", f"{name!r} is not a seqphase.core.models.Model subclass")
        return cls()
    raise ParameterError("model", f"unknown model {name!r}",
                         f"use one of {', '.join(sorted(targets))} or 'module:ClassName'")


def run_point(model_name, method, params, settings, seed_entropy, seed_key):
    """Compute one point (the function a worker runs). Returns {variable: numpy array}.

    The random stream of the point is SeedSequence(seed_entropy, spawn_key=seed_key): a function of
    the spec's seed and of the point's physical parameters only, so reruns draw the same instances.
    """
    model = get_model(model_name)
    out = model.run(method, dict(params), dict(settings), point_stream(seed_entropy, seed_key))
    return check_outputs(model, method, settings, out)


def point_stream(seed_entropy, seed_key):
    """The SeedSequence of a point: the spec's seed and the point's key (see `run_point`)."""
    return np.random.SeedSequence(seed_entropy, spawn_key=tuple(seed_key))


def check_outputs(model, method, settings, out):
    """The outputs of a point as the layout's arrays (shape checked, dtype cast), or a RuntimeError."""
    model_name = model.name
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
