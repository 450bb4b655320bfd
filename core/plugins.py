"""User plug-ins: an output channel or a prior written as a small class, everything else derived.

A researcher with a new channel knows its likelihood P(y | z) and how to sample it; a new prior, its
density and a sampler. That is all a plug-in states:

    class Probit(seqphase.Likelihood):
        labels = (-1.0, 1.0)                 # discrete y; None for a continuous y
        def __init__(self, delta=0.1):       # keyword arguments are model parameters (grid axes)
            self.delta = delta
        def log_likelihood(self, y, z):      # elementwise, broadcasting; z (..., p) when p > 1
            return scipy.special.log_ndtr(y * z / np.sqrt(self.delta))
        def sample(self, z, rng):
            return np.sign(z + np.sqrt(self.delta) * rng.standard_normal(np.shape(z)))

and a spec names it `channel = "mymodule:Probit"` (or a short name an installed package registers under
the entry-point group `seqphase.channels` / `seqphase.priors`). The family derives the rest:

* Z_out(y, omega, V) = int N(z; omega, V) P(y | z) dz, g_out = d_omega log Z_out and its derivative, by
  adaptive Gauss-Legendre quadrature in t = (z - omega) / sqrt(V) (`numerics.adaptive_moments`:
  steps of a discrete label's likelihood and transitions of any width are located, not smeared);
* the SE expectations over y: a sum over `labels` weighted by Z_out (discrete y: every label's Z_out
  and moments at all cavities of one SE step on one shared rule, `DerivedScalarChannel.label_table`),
  or, for a continuous y, an average over labels drawn by the plug-in's own sampler at fixed Gaussian
  nodes and a fixed seed (common random numbers: deterministic, Monte-Carlo error ~
  1/sqrt(`n_label_draws`) per node; each label's g_out on a fixed rule, `drawn_moments`);
* the Bayes-optimal and plug-in test errors (the most probable label's error for discrete y, the
  squared error for continuous y) and whether the channel is even (P(y | z) = P(y | -z)).

Closed forms are optional: a class that defines `g_out(y, omega, V) -> (g, dg)` (p = 1, elementwise)
or `log_partition(y, omega, V)` has them used, and `seqphase check` compares them with the derived ones.

A plug-in enters a point's identity by the SHA-256 of its module's file, so editing the class
recomputes its points (as an algorithm version bump does); the store's provenance records module,
class, file and hash. This module imports no family: the glm family adapts `Likelihood` to its scalar
channel protocol (`DerivedScalarChannel`, here, on the shared `core/channel.py`) and `Prior` to its
denoiser protocol (core/glm/priors.py).
"""

from __future__ import annotations

import hashlib
import inspect
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from seqphase.core import registry
from seqphase.core.channel import ScalarChannel
from seqphase.core.contract import Likelihood, Prior
from seqphase.core.errors import ParameterError
from seqphase.core.numerics import (GAUSSIAN_EDGES, LOG_SQRT_2PI, adaptive_moments, gauss_hermite,
                                    gaussian_kernel_rule, gaussian_window_log_moments,
                                    by_label_values, gaussian_window_sums_by_label,
                                    gaussian_window_sums_sparse, merged_panels,
                                    resolve_panels, uniform_resolution, unit_legendre)

ENTRY_POINT_GROUPS = {"channel": "seqphase.channels", "prior": "seqphase.priors"}

#: version of the quadratures that derive a p = 1 channel plug-in's quantities (`DerivedScalarChannel`); it
#: enters the identity of every point with such a channel plug-in. 4: a continuous y on a fixed y rule
#: (`y_rule`, no drawn labels), the per-sample rule checked against the interpolatory rule on its read points
#: (a kink next to a panel's end); 3: `label_table`'s rule subdivides the likelihood's joint panels, its flat
#: stretches in closed form, the windows summed in a compiled loop; 2: the SE's expectations over y on one
#: rule per (omega, V) for all labels (`label_table`), a continuous y's g_out on a fixed rule; 1 (no suffix in
#: the tag): per-label shared rules and per-sample adaptive quadrature.
DERIVED_CHANNEL_VERSION = 4
#: the same for p = 2 channel plug-ins (core/multiindex/plugin_channel.py). 4: the thresholds' y rule of a
#: continuous y bisected where the law of y is not resolved, and evenness checked off the axes (a sign
#: pattern's value on an axis is a convention); 3: the adaptive rules' kink check
#: (`numerics.adaptive_moments`, `adaptive_integrals`)
DERIVED_VECTOR_CHANNEL_VERSION = 4


# -- naming, loading and identity ------------------------------------------------------------------


def is_plugin_name(name):
    """A value of `channel`/`prior` that names a plug-in rather than a shipped one: "module:Class", or
    a short name registered under the entry-point group (looked up by `load`)."""
    return isinstance(name, str) and ":" in name


@dataclass(frozen=True)
class PluginInfo:
    """A loaded plug-in class and what provenance records of it."""

    name: str          # as the spec wrote it
    kind: str          # "channel" or "prior"
    cls: type
    module: str
    qualname: str
    file: str
    sha256: str

    @property
    def tag(self):
        """The text a point's algorithm version carries, so an edited plug-in recomputes its points; a
        channel's also names the version of its derivation (`DERIVED_CHANNEL_VERSION` for p = 1,
        `DERIVED_VECTOR_CHANNEL_VERSION` for p = 2)."""
        derivation = ""
        if self.kind == "channel":
            p = getattr(self.cls, "p", 1)
            derivation = f"/derived-v{DERIVED_CHANNEL_VERSION if p == 1 else DERIVED_VECTOR_CHANNEL_VERSION}"
        return f"{self.kind}={self.module}:{self.qualname}@{self.sha256[:16]}{derivation}"

    def provenance(self):
        return {"name": self.name, "kind": self.kind, "module": self.module, "class": self.qualname,
                "file": self.file, "sha256": self.sha256}


def _file_hash(cls):
    try:
        path = inspect.getsourcefile(cls) or inspect.getfile(cls)
        with open(path, "rb") as handle:
            return path, hashlib.sha256(handle.read()).hexdigest()
    except (TypeError, OSError):  # a class without a file (defined in a notebook): hash its source
        try:
            source = inspect.getsource(cls)
        except (TypeError, OSError):
            source = f"{cls.__module__}.{cls.__qualname__}"
        return "<no file>", hashlib.sha256(source.encode()).hexdigest()


def entry_point_names(kind):
    """{short name: "module:attr"} registered by installed packages for `kind` (core/registry.py)."""
    group = ENTRY_POINT_GROUPS[kind]
    return {name: entry.target for name, entry in registry.entry_points(group, kind, f"params.{kind}").items()}


@lru_cache(maxsize=None)
def _import(target, kind, where):
    obj = registry.resolve(target, where)
    base = Likelihood if kind == "channel" else Prior
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise ParameterError(where, f"{target!r} is not a seqphase.{base.__name__} subclass",
                             f"derive the class from seqphase.{base.__name__}")
    path, digest = _file_hash(obj)
    return obj, path, digest


def load(name, kind, where=None):
    """The `PluginInfo` of a channel or prior plug-in named "module:Class" or by a registered short name
    (ParameterError naming `where` when it cannot be imported or is not a Likelihood / Prior)."""
    where = where or f"params.{kind}"
    target = name if ":" in name else entry_point_names(kind).get(name)
    if target is None:
        raise ParameterError(where, f"no {kind} named {name!r}",
                             f"name a plug-in as \"module:Class\", or install a package that registers it "
                             f"under the entry-point group {ENTRY_POINT_GROUPS[kind]!r}")
    cls, path, digest = _import(target, kind, where)
    return PluginInfo(name=name, kind=kind, cls=cls, module=cls.__module__, qualname=cls.__qualname__,
                      file=path, sha256=digest)


REQUIRED_VALUE = object()  # a plug-in keyword without a default: the spec must give it


def load_either(name, where):
    """(kind, PluginInfo) of a plug-in that may be a channel or a prior, as `load` names it; the kind is
    the class's base (`seqphase check` takes either)."""
    for kind, base in (("channel", Likelihood), ("prior", Prior)):
        target = name if ":" in name else entry_point_names(kind).get(name)
        if target is None:
            continue
        obj = registry.resolve(target, where)
        if isinstance(obj, type) and issubclass(obj, base):
            return kind, load(name, kind, where)
    if ":" not in name and not any(entry_point_names(kind).get(name) for kind in ENTRY_POINT_GROUPS):
        raise ParameterError(where, f"no channel or prior named {name!r}",
                             "name a plug-in as \"module:Class\", or install a package that registers it")
    raise ParameterError(where, f"{name!r} is neither a seqphase.Likelihood nor a seqphase.Prior",
                         "derive the class from one of them")


def parameters(cls, where):
    """{keyword: default (REQUIRED_VALUE when it has none)} of a plug-in's constructor; its arguments must
    be keywords with number or boolean defaults (they become grid axes)."""
    out = {}
    signature = inspect.signature(cls.__init__) if cls.__init__ is not object.__init__ else None
    for name, param in (list(signature.parameters.items())[1:] if signature else []):
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ParameterError(where, f"{cls.__qualname__}.__init__ takes *{name}",
                                 "give the constructor named keyword arguments only (they are model parameters)")
        if param.default is param.empty:
            out[name] = REQUIRED_VALUE
        elif isinstance(param.default, (bool, int, float)) and not isinstance(param.default, complex):
            out[name] = param.default
        else:
            raise ParameterError(where, f"{cls.__qualname__}.__init__: {name}={param.default!r} is not a number "
                                 "or a boolean", "plug-in parameters are numbers or booleans (grid axes)")
    return out



def instantiate(info, kwargs, where):
    """The plug-in object for one point; an exception of the user's constructor becomes one line."""
    try:
        return info.cls(**kwargs)
    except Exception as exc:  # noqa: BLE001 -- the user's code: report it, naming the class and values
        args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        raise ParameterError(where, f"{info.name}({args}) raised {type(exc).__name__}: {exc}",
                             "give values the class accepts") from None


def for_point(params, kind):
    """The user's Likelihood or Prior object of one point: the plug-in named by ``params[kind]``, built with
    the constructor keywords it takes from the point's parameters."""
    info = load(params[kind], kind)
    keywords = parameters(info.cls, f"params.{kind}")
    return instantiate(info, {key: params[key] for key in keywords if key in params}, f"params.{kind}")


class PluginFault(ValueError):
    """A plug-in's method returned something unusable (NaN, wrong shape) or raised; the message names
    the class, the method and the fault."""


def call(plugin, method, *args):
    """plugin.method(*args), with any exception turned into a one-line PluginFault naming both."""
    try:
        return getattr(plugin, method)(*args)
    except PluginFault:
        raise
    except Exception as exc:  # noqa: BLE001 -- the user's code
        raise PluginFault(f"{type(plugin).__name__}.{method} raised {type(exc).__name__}: {exc}") from None


def checked(plugin, method, value, shape, allow_inf=True):
    """`value` as a float array of `shape`, or a PluginFault naming the fault."""
    try:
        value = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise PluginFault(f"{type(plugin).__name__}.{method} returned a non-numeric value ({exc})") from None
    if value.shape != tuple(shape):
        try:
            value = np.broadcast_to(value, shape).astype(float)
        except ValueError:
            raise PluginFault(f"{type(plugin).__name__}.{method} returned shape {value.shape}, expected "
                              f"{tuple(shape)}") from None
    if np.isnan(value).any():
        raise PluginFault(f"{type(plugin).__name__}.{method} returned NaN")
    if not allow_inf and not np.isfinite(value).all():
        raise PluginFault(f"{type(plugin).__name__}.{method} returned an infinite value")
    return value


def smoke_test(plugin, kind, where=None):
    """Call a plug-in once on a small batch before anything runs: the sampler's labels (or draws) must
    have the right shape, be finite and (discrete) among the declared labels / atoms, and the likelihood
    (density) of what the sampler drew must be a number above -inf. A fault is one line naming the class."""
    where = where or f"params.{kind}"
    name = type(plugin).__name__
    rng = np.random.default_rng(0)
    try:
        if kind == "channel":
            p = int(getattr(plugin, "p", 1))
            z = np.linspace(-2.0, 2.0, 7) if p == 1 else np.linspace(-2.0, 2.0, 7 * p).reshape(7, p)
            y = checked(plugin, "sample", call(plugin, "sample", z, rng), (7,), allow_inf=False)
            labels = getattr(plugin, "labels", None)
            if labels is not None and not np.isin(y, np.asarray(labels, float)).all():
                raise PluginFault(f"{name}.sample drew {sorted(set(y[~np.isin(y, np.asarray(labels, float))]))[:3]}, "
                                  f"not among its labels {tuple(labels)}")
            values = checked(plugin, "log_likelihood", call(plugin, "log_likelihood", y, z), (7,))
            what = "log_likelihood(sample(z), z)"
        else:
            x = checked(plugin, "sample", call(plugin, "sample", (7,), rng), (7,), allow_inf=False)
            atoms = getattr(plugin, "atoms", None)
            dense = plugin.has_density() if hasattr(plugin, "has_density") else atoms is None
            if atoms is not None and not dense and not np.isin(x, np.asarray(atoms, float)).all():
                raise PluginFault(f"{name}.sample drew values outside its atoms {tuple(atoms)}")
            values = checked(plugin, "log_density", call(plugin, "log_density", x), (7,))
            what = "log_density(sample(shape))"
        if not np.isfinite(values).all():
            raise PluginFault(f"{name}: {what} is -inf or +inf where the sampler drew (they disagree)")
    except PluginFault as fault:
        raise ParameterError(where, str(fault), "fix the class; `seqphase check MODULE:CLASS` runs its identities")
    return True


# -- the derived scalar channel (p = 1) ------------------------------------------------------------------

#: what a channel's likelihood looks like (evenness, the panels that resolve each label), found once per
#: plug-in class and parameter values in a process: every work of a sweep builds its channel anew
_STRUCTURES = {}
_STRUCTURES_MAX = 64


def kept(cache, key, make, size=8):
    """cache[key], made by make() when absent; once `size` results are kept, the oldest goes first. The
    derived channels keep the last few results this way: SE and a threshold ask for the same cavities,
    labels or spacings in turn, and each is a quadrature."""
    if key not in cache:
        if len(cache) >= size:
            cache.pop(next(iter(cache)))
        cache[key] = make()
    return cache[key]


def _split_at(array, cuts):
    """The pieces of `array` between the sorted indices `cuts` (what np.split returns, as plain slices:
    np.split's per-piece overhead was a fifth of a derived SE point)."""
    bounds = [0, *np.asarray(cuts).tolist(), len(array)]
    return [array[i:j] for i, j in zip(bounds[:-1], bounds[1:])]


def _array_key(*arrays):
    """A dictionary key of the contents and shape of equally shaped float arrays."""
    return hashlib.sha1(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).digest() + \
        repr(np.shape(arrays[0])).encode()


def _structure(plugin):
    """The dict in which a plug-in object's resolved structure is kept: shared by every object of the same
    class (the class object itself: an edited and re-imported module is a new class) and the same
    attribute values; the object's own dict when an attribute is not a plain hashable value."""
    try:
        key = (type(plugin), tuple(sorted(vars(plugin).items())))
        hash(key)
    except TypeError:
        return {}
    return kept(_STRUCTURES, key, dict, size=_STRUCTURES_MAX)


def _joined_runs(lo, hi, label, level, group=None):
    """Runs (arrays lo, hi, label, level) of one label, one group, that meet at an edge with the same level
    joined into one, sorted by label and position: every node of a run is within `flat_tol` of its level."""
    group = np.zeros(lo.size, dtype=np.int64) if group is None else group
    order = np.lexsort((lo, group, label))
    lo, hi, label, level, group = lo[order], hi[order], label[order], level[order], group[order]
    new = np.ones(lo.size, dtype=bool)
    new[1:] = ((label[1:] != label[:-1]) | (group[1:] != group[:-1]) | (lo[1:] != hi[:-1])
               | (level[1:] != level[:-1]))
    start = np.flatnonzero(new)
    if start.size == 0:  # no flat stretch at all (a smooth likelihood): no runs
        return lo, hi, label.astype(np.int64), level
    end = np.append(start[1:], lo.size) - 1
    return lo[start], hi[end], label[start].astype(np.int64), level[start]


class DerivedScalarChannel(ScalarChannel):
    """A p = 1 `Likelihood` as the shared scalar channel protocol (`core/channel.py`) that the glm
    family's SE, GAMP, thresholds and onset evaluate: every quantity derived from `log_likelihood` and
    `sample`, or taken from the plug-in's closed forms where it gives them.

    `tol` is the adaptive quadrature's relative tolerance (`numerics.adaptive_moments`) of `moments`, the
    per-sample g_out that GAMP and `seqphase check` use: measured on the probit and sign channels, the
    derived g_out and dg agree with the closed forms within 100 `tol` (1e-11 default: within 1e-9).
    Expectations over y at one cavity variance (SE, thresholds, test errors) use `label_table` instead,
    accurate in absolute terms to `kernel_tol` + 2 `flat_tol` (measured against the closed forms of sign
    and probit: within 7e-13 for V in [1e-6, 1]; next to a step, whose location the bisection finds to
    ~1e-12 in z, up to ~1e-12 / sqrt(V) more). A continuous y is integrated over `n_label_draws` labels drawn
    by the plug-in's sampler at each of `n_label_nodes` Gauss-Hermite nodes of z (a fixed seed: the same
    labels every call). What the likelihood looks like (evenness, its panels) is found once per plug-in class and
    parameter values in a process and shared by every channel object built from them.
    """

    label_seed = 20240601

    def __init__(self, plugin, name="plugin", tol=1e-11, use_closed_forms=True):
        if getattr(plugin, "p", 1) != 1:
            raise ParameterError("params.channel", f"{type(plugin).__name__} has p = {plugin.p}; the glm "
                                 "family takes p = 1 channels", "use the multiindex family for p > 1")
        if getattr(plugin, "noiseless", False):
            raise ParameterError("params.channel", f"{plugin!r} is noiseless (y a function of z): it has no "
                                 "finite likelihood to derive from", "derive its noisy form, channel.noisy(delta)")
        self.plugin = plugin
        self.name = name
        self.tol = float(tol)
        self.labels = None if plugin.labels is None else np.asarray(plugin.labels, dtype=float)
        self.discrete = self.labels is not None
        # a shipped channel's closed forms are its protocol (the object itself): wrapped, it is derived
        use_closed_forms = use_closed_forms and not isinstance(plugin, ScalarChannel)
        self.closed_g_out = getattr(plugin, "g_out", None) if use_closed_forms else None
        self.closed_log_partition = getattr(plugin, "log_partition", None) if use_closed_forms else None
        self._structure = _structure(plugin)
        if "even" not in self._structure:
            self._structure["even"] = self._is_even()
        self.even = self._structure["even"]
        self._weighted = ()  # (y, omega, moments) while `expect_y` evaluates its function (see there)

    # -- what the user wrote -------------------------------------------------------------------------
    def log_likelihood(self, y, z):
        y, z = np.broadcast_arrays(np.asarray(y, float), np.asarray(z, float))
        return checked(self.plugin, "log_likelihood", call(self.plugin, "log_likelihood", y, z), y.shape)

    def sample_scalar(self, z, rng):
        z = np.asarray(z, float)
        return checked(self.plugin, "sample", call(self.plugin, "sample", z, rng), z.shape, allow_inf=False)

    def _is_even(self):
        """P(y | z) = P(y | -z) on a grid of z and of labels (for a continuous y, labels the sampler
        draws); then omega = 0 is a fixed point and weak recovery has a threshold."""
        z = np.linspace(-4.0, 4.0, 81)
        if self.discrete:
            y = np.repeat(self.labels, z.size)
            z = np.tile(z, self.labels.size)
        else:
            y = self.sample_scalar(z, np.random.default_rng(self.label_seed))
        return bool(np.allclose(self.log_likelihood(y, z), self.log_likelihood(y, -z), rtol=1e-10, atol=1e-12,
                                equal_nan=False))

    # -- the posterior of z by quadrature -------------------------------------------------------------
    def moments(self, y, omega, V):
        """(log Z_out, E[t | y], Var[t | y]) with t = (z - omega) / sqrt(V), elementwise on broadcast
        arrays (flattened inside). The last few results are kept: SE asks for log Z_out and g_out of the
        same labels and nodes in turn (`expect_y`), and each is one quadrature."""
        if self._weighted and y is self._weighted[0] and omega is self._weighted[1]:
            return self._weighted[2]
        y, omega, V = np.broadcast_arrays(*(np.asarray(a, float) for a in (y, omega, V)))
        key = _array_key(y, omega, V)
        return kept(self.__dict__.setdefault("_moments_cache", {}), key, lambda: self._unique_moments(y, omega, V))

    def _unique_moments(self, y, omega, V):
        """`moments` computed once per distinct (y, omega, V): through the shared rule for a discrete label
        at many cavities of similar V (SE, GAMP), else the per-sample adaptive rule."""
        rows = np.stack([y.ravel(), omega.ravel(), V.ravel()], axis=1)
        unique, inverse = np.unique(rows, axis=0, return_inverse=True)
        inverse = inverse.ravel()
        out = None
        if self.discrete and unique.shape[0] > 16:
            parts = [np.empty(unique.shape[0]) for _ in range(3)]
            for label in np.unique(unique[:, 0]):
                mask = unique[:, 0] == label
                shared = self.shared_moments(float(label), unique[mask, 1], unique[mask, 2])
                if shared is None:
                    break
                for part, values in zip(parts, shared):
                    part[mask] = values
            else:
                out = parts
        if out is None:
            out = self._moments(unique[:, 0], unique[:, 1], unique[:, 2])
        return tuple(part[inverse].reshape(y.shape) for part in out)

    def _moments(self, y, omega, V):
        shape = y.shape
        y, omega, sv = y.ravel(), omega.ravel(), np.sqrt(V.ravel())

        def log_f(idx, t):
            return -0.5 * t * t - LOG_SQRT_2PI + self.log_likelihood(y[idx], omega[idx] + sv[idx] * t)

        try:
            result = adaptive_moments(log_f, np.broadcast_to(GAUSSIAN_EDGES, (y.size, GAUSSIAN_EDGES.size)),
                                      tol=self.tol)
        except FloatingPointError:
            raise PluginFault(f"{type(self.plugin).__name__}.log_likelihood returned NaN") from None
        return (result.log_mass.reshape(shape), result.mean.reshape(shape), result.var.reshape(shape))

    #: half-width of the window of z over which a discrete label's likelihood is resolved once
    #: (`resolve_panels`) for the SE's shared rule; cavities reaching beyond it use the per-sample rule
    z_window = 60.0
    #: the shared rule's panels per cavity standard deviation, and its reach in standard deviations
    kernel_panels, kernel_reach = 2.0, 12.0
    #: largest shared rule (nodes) before the per-sample adaptive rule is cheaper, and the largest ratio
    #: of the cavities' standard deviations one shared rule serves
    shared_nodes_max, shared_spread = 8_000, 1.5

    def _of_label(self, label):
        """log P(label | z) as a function of z alone (the 1-d integrand the panel finders resolve)."""
        return lambda z: self.log_likelihood(np.full(z.shape, label), z)

    def label_edges(self, label):
        """Panel edges over [-z_window, z_window] resolving P(label | z) in relative terms (cached per
        label and, through `_structure`, per plug-in class and parameters)."""
        cache = self._structure.setdefault("label_edges", {})
        if label not in cache:
            try:
                cache[label] = resolve_panels(self._of_label(label), -self.z_window, self.z_window)
            except FloatingPointError:
                raise PluginFault(f"{type(self.plugin).__name__}.log_likelihood returned NaN") from None
        return cache[label]

    def feature_edges(self):
        """The edges every label's likelihood needs in absolute terms (`numerics.merged_panels` of all labels
        at once, from the union of their `label_edges`: an edge stays where some label needs it): its steps
        and the panels of its transitions, nothing where it is smooth or negligible. Cached per plug-in
        class and parameters."""
        if "feature_edges" not in self._structure:
            labels = list(map(float, self.labels))
            try:
                edges = np.unique(np.concatenate([self.label_edges(label) for label in labels]))
                self._structure["feature_edges"] = merged_panels(
                    [self._of_label(label) for label in labels], edges, tol=self.feature_tol,
                    nodes=gaussian_kernel_rule(self.kernel_tol)[1], unit=1.0)
            except FloatingPointError:
                raise PluginFault(f"{type(self.plugin).__name__}.log_likelihood returned NaN") from None
        return self._structure["feature_edges"]

    #: absolute tolerance (relative to the label's largest probability, per unit of z) to which
    #: `feature_edges` resolve a likelihood, and that of the kernel rule (`numerics.gaussian_kernel_rule`)
    feature_tol, kernel_tol = 1e-12, 1e-12

    def label_table(self, omega, V):
        """(log Z_out, E[t | y], Var[t | y]) of every label (arrays (labels, K)) at the cavities
        N(omega_k, V), omega 1-d and V one number (SE, the thresholds), on one rule (`kernel_nodes`):
        composite Gauss-Legendre in z over the likelihood's `feature_edges`, each panel cut in equal parts
        of at most h <= c sqrt(V) (`grid_step`), with (R, nodes, c) from
        `numerics.gaussian_kernel_rule(kernel_tol)`. The likelihood is read once per node for all cavities,
        each cavity sums the nodes of its window omega_k +- R sqrt(V), except where a label's likelihood is
        flat (within `flat_tol` of one level over consecutive parts): there the level times the Gaussian's
        moments over the stretch, in closed form (both in `numerics.gaussian_window_sums`). Accurate in
        absolute terms, within kernel_tol + 2 flat_tol per moment: a label's moments are as good as its
        probability is large, which is what an expectation over y weighted by Z_out needs (`expect_y`) and
        not what GAMP's g_out of an unlikely label needs (`moments`). None where the windows leave
        [-z_window, z_window]."""
        omega = np.asarray(omega, float)
        sigma = math.sqrt(float(V))
        reach, nodes, width = gaussian_kernel_rule(self.kernel_tol)
        if not (sigma > 0 and omega.size and omega.min() - reach * sigma > -self.z_window
                and omega.max() + reach * sigma < self.z_window):
            return None
        # a continuous label's likelihood is smooth in z on the scale `resolution`: no features to place
        step = self.grid_step(width * sigma if self.discrete else min(width * sigma, self.resolution()))
        if not self.discrete:
            mass, first, second = self._continuous_sums(omega, sigma, step)
        elif self.z_window / step >= 2.0**50:  # chunk indices exact in float64 (V not vanishing)
            return None
        else:
            z, weight, by_label, runs = self.kernel_nodes(step, omega, reach * sigma)
            mass, first, second = gaussian_window_sums_by_label(omega, sigma, reach, z, weight, *by_label, runs)
        safe = np.where(mass > 0, mass, 1.0)
        mean = first / safe
        var = np.maximum(second / safe - mean * mean, 0.0)
        with np.errstate(divide="ignore"):
            log_z = np.log(mass)
        return log_z, mean, var

    def _continuous_sums(self, omega, sigma, step):
        """The window sums of `label_table` for a continuous y, whose labels are the `y_rule` nodes: one rule
        in z over the cavities' windows, panels of `step` (the kernel rule's width cut to the likelihood's
        `resolution`), and at each node only the y nodes where P(y | z) is not negligible (`y_support`: the
        stretches found at the y rule's probes, a node between two probes taking both of theirs and what lies
        between), so that the work and memory go with the likelihood's width in y, not with nodes x labels."""
        reach, nodes, _ = gaussian_kernel_rule(self.kernel_tol)
        first = np.floor((omega - reach * sigma) / step).astype(np.int64)
        count = np.floor((omega + reach * sigma) / step).astype(np.int64) - first + 1
        panel = np.unique(np.repeat(first, count) + (np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)))
        u, wu = unit_legendre(nodes)
        z = ((panel[:, None] + u[None, :]) * step).ravel()
        weight = np.broadcast_to(wu * step, (panel.size, nodes)).ravel()
        labels, _ = self.y_rule()
        probe, low, high = self._structure["y_support"]
        right = np.clip(np.searchsorted(probe, z), 1, probe.size - 1)
        low = np.minimum(low[right - 1], low[right])
        high = np.maximum(high[right - 1], high[right])
        high = np.maximum(high, low)
        count = high - low
        row_start = np.concatenate([[0], np.cumsum(count)])
        node_of = np.repeat(np.arange(z.size), count)
        label_of = low[node_of] + (np.arange(row_start[-1]) - row_start[node_of])
        values = np.empty(label_of.size)
        block = 4_000_000
        for start in range(0, label_of.size, block):
            part = slice(start, start + block)
            with np.errstate(under="ignore"):
                values[part] = np.exp(self.log_likelihood(labels[label_of[part]], z[node_of[part]]))
        return gaussian_window_sums_sparse(omega, sigma, reach, z, weight, row_start, label_of, values, labels.size)

    #: grid spacings per octave (`grid_step`)
    steps_per_octave = 8

    @classmethod
    def grid_step(cls, widest):
        """The largest 2^(j / steps_per_octave), j integer, at most `widest`: the kernel grid's spacing for
        panels of at most `widest`. Narrower panels only make the rule more accurate (its error bound grows
        with the width), and a spacing shared by nearby V lets the SE's iterations reuse the likelihood's
        table (`kernel_nodes`) at the cost of at most 2^(1 / steps_per_octave) - 1 more nodes."""
        return 2.0 ** (math.floor(math.log2(widest) * cls.steps_per_octave) / cls.steps_per_octave)

    #: grid panels a chunk of `kernel_nodes` holds
    chunk_panels = 16
    #: spacings whose chunks `kernel_nodes` keeps: 8 octaves of `grid_step`'s ladder, the range an SE run's V
    #: crosses, so every point of a sweep on a worker after the first reuses the chunks (sign(z), SE point:
    #: 3.9x the closed form with one octave kept, 1.6-2x with eight; the chunks are a few MB)
    spacings_kept = 8 * steps_per_octave
    #: how far from one level a likelihood may be to count as flat (`label_table`); P(y | z) <= 1
    flat_tol = 1e-14

    def kernel_nodes(self, step, omega, half_width):
        """The kernel rule over the grid of spacing `step` where the windows omega_k +- half_width reach it:
        (z, weight, the likelihood laid out by `numerics.by_label_values`, flat runs (lo, hi, label, level)). Nodes are kept where some
        label's likelihood is not flat, with 0 for the labels that are: a run is a stretch [lo, hi] of panels
        on which the label's likelihood is within `flat_tol` of one level at every node (runs at a level
        below `flat_tol` are left out). The grid's spans of `chunk_panels` panels are each computed once per
        plug-in class and parameters and kept for the last `spacings_kept` spacings: an SE iteration at a
        spacing seen before reads no likelihood."""
        table = kept(self._structure.setdefault("kernel_nodes", {}), step, lambda: {"chunks": {}, "assembled": {}},
                     size=self.spacings_kept)
        span = step * self.chunk_panels
        lo = np.floor((omega - half_width) / span).astype(np.int64)
        hi = np.floor((omega + half_width) / span).astype(np.int64)
        base = int(lo.min())
        reached = np.zeros(int(hi.max()) - base + 1, dtype=bool)
        for offset in range(int((hi - lo).max()) + 1):  # a window spans a chunk or two
            reached[(lo + offset)[lo + offset <= hi] - base] = True
        chunks = (np.flatnonzero(reached) + base).tolist()

        def assemble():
            store = table["chunks"]
            missing = [chunk for chunk in chunks if chunk not in store]
            if missing:
                store.update(self._kernel_chunks(np.array(missing, dtype=np.int64), step))
            parts = [store[chunk] for chunk in chunks]
            z, weight, likelihood, *runs = (np.concatenate([part[i] for part in parts]) for i in range(7))
            return z, weight, by_label_values(likelihood), _joined_runs(*runs)

        return kept(table["assembled"], bytes(reached) + repr(base).encode(), assemble)

    def _kernel_chunks(self, chunks, step):
        """{chunk: (z, weight, likelihood, run lo, hi, label, level)} of `kernel_nodes` for the chunks (sorted
        integers; chunk i spans [i, i + 1] chunk_panels step): the `feature_edges` inside each chunk, every
        panel they leave cut in equal parts of at most `step` (the Gaussian's resolution), `nodes` Gauss-Legendre
        nodes on each part, the likelihood of every label read at once; then each label's flat parts as runs
        and the nodes of the other parts."""
        _, nodes, _ = gaussian_kernel_rule(self.kernel_tol)
        starts, stops = chunks * self.chunk_panels * step, (chunks + 1) * self.chunk_panels * step
        features = self.feature_edges()
        labels = self.labels
        first = np.searchsorted(features, starts, side="right")   # the features strictly inside each chunk
        inner = np.searchsorted(features, stops, side="left") - first
        coarse = inner + 1                                        # the likelihood's panels of each chunk
        chunk_of = np.repeat(np.arange(chunks.size), coarse)
        position = np.arange(coarse.sum()) - np.repeat(np.cumsum(coarse) - coarse, coarse)
        feature = first[chunk_of] + position
        left = np.where(position == 0, starts[chunk_of], features[np.clip(feature - 1, 0, features.size - 1)])
        right = np.where(position == inner[chunk_of], stops[chunk_of],
                         features[np.clip(feature, 0, features.size - 1)])
        parts = np.maximum(np.ceil((right - left) / step * (1.0 - 1e-12)), 1.0).astype(np.int64)
        piece = np.arange(parts.sum()) - np.repeat(np.cumsum(parts) - parts, parts)
        part_width = np.repeat((right - left) / parts, parts)
        a = np.repeat(left, parts) + part_width * piece
        b = np.where(piece == np.repeat(parts, parts) - 1, np.repeat(right, parts),
                     np.repeat(left, parts) + part_width * (piece + 1))  # b of a part is a of the next, exactly
        chunk_of = np.repeat(chunk_of, parts)
        u, wu = unit_legendre(nodes)
        z = a[:, None] + (b - a)[:, None] * u                                     # (parts, nodes)
        weight = (b - a)[:, None] * wu
        with np.errstate(under="ignore"):
            likelihood = np.exp(self.log_likelihood(labels, z[:, :, None]))  # (parts, nodes, labels)
        level = likelihood[:, 0, :]
        flat = np.abs(likelihood - level[:, None, :]).max(axis=1) <= self.flat_tol  # (parts, labels)
        kept = ~flat.all(axis=1)
        values = np.where(flat[:, None, :], 0.0, likelihood)
        part, label = np.nonzero(flat & (np.abs(level) > self.flat_tol))
        runs = _joined_runs(a[part], b[part], label, level[part, label], group=chunk_of[part])
        run_chunk = np.searchsorted(starts, runs[0], side="right") - 1
        node_split = np.cumsum(np.bincount(chunk_of[kept], minlength=chunks.size))[:-1] * nodes
        run_split = np.cumsum(np.bincount(run_chunk, minlength=chunks.size))[:-1]
        order = np.argsort(run_chunk, kind="stable")
        columns = [_split_at(column, node_split) for column in (z[kept].ravel(), weight[kept].ravel(),
                                                                  values[kept].reshape(-1, labels.size))]
        columns += [_split_at(column[order], run_split) for column in runs]
        return {chunk: tuple(column[i] for column in columns) for i, chunk in enumerate(chunks.tolist())}

    def _weighted_table(self, omega, V):
        """`label_table` of the last few (omega, V) (SE asks for the same cavities in turn: mhat, the free
        entropy and the errors at the fixed point)."""
        key = _array_key(omega) + repr(float(V)).encode()
        return kept(self.__dict__.setdefault("_table_cache", {}), key, lambda: self.label_table(omega, V), size=4)

    def shared_moments(self, label, omega, V):
        """(log Z_out, E[t | y], Var[t | y]) of one discrete label at many cavities N(omega_k, V_k) (1-d
        arrays; the V_k within a factor `shared_spread` of each other, as in SE, where V is one number,
        and in GAMP, where V_mu concentrates), on one rule shared by all of them: composite
        Gauss-Legendre over the union of the label's own panels (`label_edges`) and panels of
        sqrt(min V) / `kernel_panels` reaching `kernel_reach` standard deviations beyond the omegas. One
        likelihood evaluation per node instead of one per node and cavity: what makes the SE and GAMP of
        a plug-in affordable. None when the rule would be too large (V tiny against the spread of omega)
        or leave the window: use the per-sample rule then. Cavities whose posterior lies far out (an
        unlikely label) are recomputed by the per-sample rule."""
        V = np.broadcast_to(np.asarray(V, float), omega.shape)
        sigma = np.sqrt(V)
        low, high = float(sigma.min()), float(sigma.max())
        if low <= 0 or high > self.shared_spread * low:
            return None
        lo, hi = omega.min() - self.kernel_reach * high, omega.max() + self.kernel_reach * high
        step = low / self.kernel_panels
        if lo < -self.z_window or hi > self.z_window or (hi - lo) / step * 6 > self.shared_nodes_max:
            return None
        own = self.label_edges(label)
        if np.count_nonzero((own > lo) & (own < hi)) * 6 > self.shared_nodes_max:
            return None
        edges = np.unique(np.concatenate([own[(own > lo) & (own < hi)], np.arange(lo, hi, step), [hi]]))
        u, wu = np.polynomial.legendre.leggauss(6)
        a, b = edges[:-1, None], edges[1:, None]
        z = (a + (b - a) * (u + 1) / 2).ravel()
        log_w = np.log(((b - a) / 2 * wu).ravel()) + self.log_likelihood(np.full(z.shape, label), z)
        # Each cavity reads only the nodes within `kernel_reach` of its mean (z is sorted): a band of the
        # cavity x node matrix, as narrow as the kernel when the omegas spread far wider than sqrt(V).
        log_z, mean, var = gaussian_window_log_moments(omega, sigma, self.kernel_reach, z, log_w)
        # A label unlikely at its cavity puts the posterior far out, where the shared panels are too wide
        # for the Gaussian's decay (or beyond their reach): those few go to the per-sample rule.
        far = (np.abs(mean) + 5.0 * np.sqrt(var) > self.kernel_reach - 4.0) & np.isfinite(log_z)
        if far.any():
            labels = np.full(int(far.sum()), label)
            log_z[far], mean[far], var[far] = self._moments(labels, omega[far], V[far])
        return log_z, mean, var

    def derived_g_out(self, y, omega, V):
        """(g, dg) by quadrature: g = E[t | y] / sqrt(V), dg = (Var[t | y] - 1) / V; (0, 0) for a label
        impossible under N(omega, V) (no information)."""
        log_z, mean, var = self.moments(y, omega, V)
        V = np.broadcast_to(np.asarray(V, float), log_z.shape)
        possible = np.isfinite(log_z)
        g = np.where(possible, mean / np.sqrt(V), 0.0)
        dg = np.where(possible, (var - 1.0) / V, 0.0)
        return g, dg

    def log_partition(self, y, omega, V):
        if self.closed_log_partition is not None:
            shape = np.broadcast_shapes(np.shape(y), np.shape(omega), np.shape(V))
            return checked(self.plugin, "log_partition", call(self.plugin, "log_partition", y, omega, V), shape)
        return self.moments(y, omega, V)[0]

    def g_out_scalar(self, y, omega, V):
        if self.closed_g_out is not None:
            shape = np.broadcast_shapes(np.shape(y), np.shape(omega), np.shape(V))
            g, dg = call(self.plugin, "g_out", y, omega, V)
            return (checked(self.plugin, "g_out", g, shape, allow_inf=False),
                    checked(self.plugin, "g_out", dg, shape, allow_inf=False))
        return self.derived_g_out(y, omega, V)

    #: most features in z the outer rule of the SE is refined at (`omega_features`)
    max_features = 100

    def likelihood_scales(self):
        """(centres, widths) in z of a discrete label's structure narrower than one unit: the panels of
        `feature_edges` (a step, a ridge, a transition); at most `max_features` of them, evenly chosen (each
        refines the rule over +-12 of its widths, so a subset still covers a run of them). None for a
        continuous y: its likelihood's scale is uniform in z (`resolution`) and Z_out smooths it by the
        label noise, so the base panels serve down to noise variances of ~1e-3 (measured: the noisy forms
        of |z| and z^2 in benchmarks/derived_route.py approach)."""
        if "scales" not in self._structure:
            if self.discrete:
                edges = self.feature_edges()
                widths, centres = np.diff(edges), 0.5 * (edges[1:] + edges[:-1])
            else:
                centres = widths = np.zeros(0)
            narrow = widths < 1.0
            centres, widths = centres[narrow], widths[narrow]
            if centres.size > self.max_features:
                pick = np.linspace(0, centres.size - 1, self.max_features).round().astype(int)
                centres, widths = centres[pick], widths[pick]
            self._structure["scales"] = (centres, widths)
        return self._structure["scales"]

    def omega_features(self, m, V):
        """The outer SE rule's features in xi (omega = sqrt(m) xi): the cavity's own width sqrt(V / m), and
        where the likelihood has structure narrower than the base panels (`likelihood_scales`), that
        structure smoothed by the cavity, max(width, sqrt V) / sqrt m: a ridge or a transition of P(y | z)
        shows in the integrand over omega on that scale, and the base panels alone would not resolve it."""
        features = super().omega_features(m, V)
        if m <= 0 or V <= 0:
            return features
        s = math.sqrt(m)
        centres, widths = self.likelihood_scales()
        smoothed = np.maximum(widths, math.sqrt(V))
        # wider than the base panels' unit in xi: nothing to refine; beyond |xi| = 12 the outer weight is
        # below e^-72
        keep = (smoothed < s) & (np.abs(centres) < 12.0 * s)
        return features + [(float(c) / s, float(w) / s) for c, w in zip(centres[keep], smoothed[keep])]

    # -- expectations over y -------------------------------------------------------------------------
    def expect_y(self, func, omega, V):
        """E_{y ~ P(y | omega, V)}[func(y, omega, V)] over the array omega."""
        omega = np.asarray(omega, float)
        if self.discrete:
            derived = self.closed_g_out is None or self.closed_log_partition is None
            table = self._weighted_table(omega.ravel(), V) if derived and np.ndim(V) == 0 else None
            total = 0.0
            for row, label in enumerate(self.labels):
                y = np.full(omega.shape, label)
                if table is not None:
                    # each label's moments weighted by its Z_out: the table's absolute accuracy serves for
                    # the g_out and log Z_out that `func` asks `moments` for with these very arrays
                    self._weighted = (y, omega, tuple(part[row].reshape(omega.shape) for part in table))
                try:
                    weight = np.exp(self.log_partition(y, omega, V))
                    with np.errstate(invalid="ignore"):  # 0 * log 0 of a label impossible there: no weight
                        total = total + np.where(weight > 0, weight * func(y, omega, V), 0.0)
                finally:
                    self._weighted = ()
            return total
        return self._expect_continuous(func, omega, V)

    def _expect_continuous(self, func, omega, V):
        """E over a continuous y: sum_j W_j Z_out(Y_j | omega, V) func(Y_j, omega, V) on the y rule
        (`y_rule`), every node's Z_out and moments from `label_table` at one V (the SE's cavities), else by
        the per-sample rule (`moments`)."""
        nodes, weights = self.y_rule()
        shape = omega.shape
        flat = omega.ravel()
        y = np.repeat(nodes[:, None], flat.size, axis=1)
        om = np.broadcast_to(flat, y.shape)
        Vb = np.broadcast_to(np.asarray(V, float), shape).ravel() if np.ndim(V) else float(V)
        derived = self.closed_g_out is None or self.closed_log_partition is None
        table = self._weighted_table(flat, V) if np.ndim(V) == 0 else None
        if table is not None and derived:
            self._weighted = (y, om, table)
        try:
            log_z = table[0] if table is not None else self.log_partition(y, om, Vb)
            with np.errstate(invalid="ignore"):  # 0 * log 0 where a node is impossible: no weight
                values = np.where(log_z > -np.inf, np.exp(log_z) * func(y, om, Vb), 0.0)
        finally:
            self._weighted = ()
        return (weights @ values).reshape(shape)

    #: half-width of the z range over which the y rule of a continuous label resolves P(y | z), and its
    #: tolerance on the normalisation int P(y | z) dy = 1 at every z of that range
    y_reach, y_tol = 16.0, 1e-9
    #: how far below its largest value (in log) a continuous label's likelihood counts as zero
    y_negligible = 40.0
    #: nodes of a y panel, and the draws per z that place the y rule's range
    y_nodes, y_draws = 12, 16

    def table_labels(self):
        """The labels `label_table` tabulates: a discrete y's labels, a continuous y's `y_rule` nodes."""
        return self.labels if self.discrete else self.y_rule()[0]

    def y_rule(self):
        """(nodes, weights) of a composite Gauss-Legendre rule in y on which P(y | z) integrates to one
        within `y_tol` at every z of [-y_reach, y_reach] (spaced by the likelihood's `resolution` in z):
        its range from the sampler's labels there (a fixed seed), widened while the normalisation misses
        mass in the tails, its panels the narrowest `numerics.uniform_resolution` of P(y | z) in y at those
        z, halved while the normalisation is off. A likelihood that does not integrate to one (a missing
        constant) or whose tails outrun the widening is a PluginFault. Found once per plug-in class and
        parameters: an expectation over y is then a sum over fixed nodes, not a Monte-Carlo average."""
        if "y_rule" not in self._structure:
            self._structure["y_rule"] = self._make_y_rule()
        return self._structure["y_rule"]

    def _make_y_rule(self):
        name = type(self.plugin).__name__
        spacing = min(0.25, self.resolution())
        z = np.linspace(-self.y_reach, self.y_reach, int(min(2 * self.y_reach / spacing, 512)) + 1)
        drawn = self.sample_scalar(np.repeat(z, self.y_draws), np.random.default_rng(self.label_seed))
        lo, hi = float(drawn.min()), float(drawn.max())
        span = max(hi - lo, 1e-6 * max(abs(lo), abs(hi), 1.0))
        lo, hi = lo - 0.25 * span, hi + 0.25 * span
        probe = z[:: max(1, z.size // 16)]
        width = span
        for label in probe:
            def log_f(y, label=float(label)):
                return self.log_likelihood(y, np.full(y.shape, label))

            try:
                width = min(width, uniform_resolution(log_f, lo, hi, tol=self.feature_tol, nodes=self.y_nodes,
                                                      widest=span / 4, narrowest=span * 1e-7))
            except FloatingPointError:
                raise PluginFault(f"{name}.log_likelihood returned NaN") from None
        u, wu = unit_legendre(self.y_nodes)
        worst = math.inf
        for _ in range(8):
            edges = np.linspace(lo, hi, int(math.ceil((hi - lo) / width)) + 1)
            nodes = (edges[:-1, None] + np.diff(edges)[:, None] * u).ravel()
            weights = (np.diff(edges)[:, None] * wu).ravel()
            with np.errstate(under="ignore"):
                log_p = self.log_likelihood(nodes[:, None], z[None, :])
            mass = weights @ np.exp(log_p)
            worst = float(np.max(np.abs(mass - 1.0)))
            if worst <= self.y_tol:
                # each probe's stretch of nodes where P(y | z) is not negligible (below e^-40 of its
                # largest value: a contribution under 1e-17 of the largest, far below y_tol)
                significant = log_p > np.max(log_p) - self.y_negligible
                some = significant.any(axis=0)
                low = np.where(some, np.argmax(significant, axis=0), 0)
                high = np.where(some, nodes.size - np.argmax(significant[::-1], axis=0), 0)
                self._structure["y_support"] = (z, low, high)
                return nodes, weights
            if np.all(mass > 1.0 + self.y_tol) and np.ptp(mass) < 1e-3 * np.min(mass):
                break  # the same excess everywhere: not a normalised density
            if np.any(mass < 1.0 - self.y_tol):
                lo, hi = lo - span, hi + span  # missing mass: the tails reach further
                span *= 2
            width /= 2
        raise PluginFault(f"{name}.log_likelihood of a continuous y must be a density in y: int P(y | z) dy "
                          f"is off 1 by {worst:.3g} at some z in [-{self.y_reach:g}, {self.y_reach:g}] (a "
                          "missing normalisation constant, or tails too heavy to integrate)")

    def resolution(self):
        """The widest uniform panels on which the likelihood of a continuous y is resolved
        (`numerics.uniform_resolution` of P(y | z) in z, for labels the sampler draws at z = -2 ... 2 from
        the fixed seed; the narrowest of them), found once per plug-in class and parameters: the width
        below which `label_table` cuts its panels for a continuous y."""
        if "resolution" not in self._structure:
            z0 = np.linspace(-2.0, 2.0, 5)
            drawn = self.sample_scalar(z0, np.random.default_rng(self.label_seed))
            widths = []
            for label in drawn:
                def log_f(z, label=float(label)):
                    return self.log_likelihood(np.full(z.shape, label), z)

                try:
                    widths.append(uniform_resolution(log_f, -self.z_window, self.z_window, tol=self.feature_tol,
                                                     nodes=gaussian_kernel_rule(self.kernel_tol)[1]))
                except FloatingPointError:
                    raise PluginFault(f"{type(self.plugin).__name__}.log_likelihood returned NaN") from None
            self._structure["resolution"] = float(min(widths))
        return self._structure["resolution"]

    def _label_log_partitions(self, omega, V):
        """log Z_out of every label (labels, *omega.shape) for an expectation over omega weighted by
        it (the test errors): the closed form where the plug-in gives one, else `label_table`."""
        table = None if self.closed_log_partition is not None else self._weighted_table(omega.ravel(), V)
        if table is None:
            return np.stack([self.log_partition(np.full(omega.shape, label), omega, V) for label in self.labels])
        return table[0].reshape((self.labels.size,) + omega.shape)

    def _label_moments(self, omega, V):
        """E[y] and E[y^2] under P(y | omega, V) on the y rule (continuous y); at V = 0 under P(y | z = omega)."""
        if V == 0:
            nodes, weights = self.y_rule()
            omega = np.asarray(omega, float)
            with np.errstate(under="ignore"):
                density = np.exp(self.log_likelihood(nodes[:, None], omega.ravel()[None, :])) * weights[:, None]
            return ((nodes @ density).reshape(omega.shape), ((nodes * nodes) @ density).reshape(omega.shape))
        return (self.expect_y(lambda y, o, v: y, omega, V), self.expect_y(lambda y, o, v: y * y, omega, V))

    def prediction_error(self, omega, V):
        """Bayes-optimal test error given omega: 1 - max_y P(y | omega, V) (discrete: the most probable
        label's error), Var[y | omega, V] (continuous: the posterior-mean predictor's squared error)."""
        omega = np.asarray(omega, float)
        if self.discrete:
            return 1.0 - np.exp(np.max(self._label_log_partitions(omega, V), axis=0))
        first, second = self._label_moments(omega, V)
        return np.maximum(second - first**2, 0.0)

    def plugin_error(self, rho, m, q):
        """Test error of the plug-in predictor z_hat = x_hat . f, with (z, z_hat) Gaussian of covariance
        [[rho, m], [m, q]]: discrete y, predicting the label most likely at z = z_hat; continuous y,
        predicting E[y | z = z_hat]."""
        xi, w = gauss_hermite(64)
        q = max(float(q), 0.0)
        z_hat = math.sqrt(q) * xi
        omega = (m / q) * z_hat if q > 0 else np.zeros_like(xi)
        V = max(rho - (m * m / q if q > 0 else 0.0), 1e-300)
        if self.discrete:
            scores = np.stack([self.log_likelihood(np.full(z_hat.shape, label), z_hat) for label in self.labels])
            predicted = np.argmax(scores, axis=0)
            log_z = self._label_log_partitions(omega, V)[predicted, np.arange(predicted.size)]
            return float(1.0 - w @ np.exp(log_z))
        first_hat, _ = self._label_moments(z_hat, 0)  # E[y | z = z_hat]
        first, second = self._label_moments(omega, V)
        return float(w @ (second - 2.0 * first * first_hat + first_hat**2))

    def __repr__(self):
        return f"DerivedScalarChannel({self.plugin!r})"
