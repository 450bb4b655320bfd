"""Sweep specs: a declarative TOML file per figure, parsed and validated into a `Sweep`.

A spec names a model from the registry, gives each model parameter one value (fixed) or several
(an axis), picks a method with its settings, and a seed:

    name = "glm-perceptron-se"
    title = "Gaussian-prior perceptron: Bayes-optimal overlap and error"
    model = "glm"
    seed = 1
    [params]
    prior = "gaussian"
    channel = "sign"
    alpha = { start = 0.05, stop = 10.0, num = 100 }   # or [0.5, 1.0], or "0.05:10:100"
    [method]
    name = "se"
    max_iter = 2000

A numeric method setting given several values (`d = [250, 500, 1000]`, a range, or `--set d=250,500`)
is a grid axis like a parameter: a dim of the stored dataset, each value its own points and seeds. A
setting whose values would change what a point stores (`n_seeds`, `max_iter`: the length of a dim), or
that is not a number, takes one value; a list is refused naming it.

Every problem is reported as a `SpecError` naming the key (e.g. `params.alpha`) and the fix.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from seqphase.core.errors import ParameterError, SpecError
from seqphase.core.models import LIST_KINDS, canonical_float, get_model
from seqphase.results.safe_io import read_toml
from seqphase.sweeps.families import sweep_files
from seqphase.sweeps.limits import check_count, grid_size

TOP_LEVEL_KEYS = {"name", "title", "description", "reference", "model", "seed", "params", "method", "plot"}
NAME_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")  # matched whole (fullmatch): no trailing newline


@dataclass
class Sweep:
    """A validated sweep: every model parameter has a list of values (length 1 = fixed)."""

    name: str
    title: str
    description: str
    reference: str
    model: str
    method: str
    seed: int
    params: dict
    settings: dict
    plot: dict = field(default_factory=dict)
    source: str = ""
    text: str = ""
    overrides: tuple = ()
    setting_axes: dict = field(default_factory=dict)  # setting -> its values (settings holds the first)

    @property
    def axes(self):
        """The parameters swept over more than one value."""
        return [name for name, values in self.params.items() if len(values) > 1]

    def resolved(self):
        """The sweep after defaults and overrides, as plain JSON-able data (stored as provenance)."""
        return {"name": self.name, "title": self.title, "model": self.model, "method": self.method,
                "seed": self.seed, "params": self.params, "settings": self.settings,
                "setting_axes": self.setting_axes, "overrides": list(self.overrides), "source": self.source}


def shipped_specs():
    """{name: path} of the sweep files the registered model families ship (each family's sweeps folder, e.g.
    core/glm/sweeps/*.toml; `seqphase.sweeps.families`)."""
    return sweep_files()


def load_sweep(name_or_path, overrides=(), rename=None):
    """Load a shipped sweep by name, or a spec file by path, apply `--set` overrides, validate."""
    shipped = shipped_specs()
    path = Path(name_or_path)
    if name_or_path in shipped:
        path = shipped[name_or_path]
    elif not (path.suffix == ".toml" and path.is_file()):
        raise SpecError("SWEEP", f"no shipped sweep or spec file named {name_or_path!r}",
                        "run `seqphase list` for the shipped names, or give a path to a .toml file")
    text, raw = read_toml(path, SpecError, "fix the syntax of the spec file")
    return parse_sweep(raw, source=str(path), text=text, overrides=overrides, rename=rename)


def parse_sweep(raw, source="<spec>", text="", overrides=(), rename=None):
    unknown = set(raw) - TOP_LEVEL_KEYS
    if unknown:
        raise SpecError(sorted(unknown)[0], "unknown top-level key",
                        f"use only {', '.join(sorted(TOP_LEVEL_KEYS))}")
    for key in ("name", "model", "params", "method"):
        if key not in raw:
            raise SpecError(key, "missing", f"add `{key} = ...` to the spec")
    name = rename or raw["name"]
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name) or ".." in name:
        raise SpecError("name", f"{name!r} is not a valid sweep name",
                        "use lower-case letters, digits, '-', '_' or '.'")
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SpecError("seed", f"expected a non-negative integer, got {seed!r}", "set seed = 1 (say)")
    if not isinstance(raw["params"], dict):
        raise SpecError("params", "expected a table", "write [params] with one key per parameter")
    method_table = raw["method"]
    if not isinstance(method_table, dict) or "name" not in method_table:
        raise SpecError("method.name", "missing", "add name = \"se\" (or \"gamp\", \"threshold\") under [method]")
    plot = raw.get("plot", {})
    if not isinstance(plot, dict):
        raise SpecError("plot", "expected a table")

    try:
        model = get_model(raw["model"]) if isinstance(raw["model"], str) else None
        if model is None:
            raise SpecError("model", f"expected a model name, got {raw['model']!r}")
        method = method_table["name"]
        model.method(method)
        raw_settings = {k: v for k, v in method_table.items() if k != "name"}
        raw_params = dict(raw["params"])
        model = model.specialise(method, _plugin_values(model, raw_params, overrides))
        raw_settings, raw_params = _apply_overrides(model, method, raw_settings, raw_params, overrides)
        for key, value in [(f"params.{k}", v) for k, v in raw_params.items()] + \
                          [(f"method.{k}", v) for k, v in raw_settings.items()]:
            _refuse_infinite(value, key)
        setting_axes = _setting_axes(model, method, raw_settings)
        settings = model.check_settings(method, {**raw_settings, **{k: v[0] for k, v in setting_axes.items()}})
        _check_layout_fixed(model, method, settings, setting_axes)
        params = {}
        for pname, value in raw_params.items():
            values = expand_values(value, f"params.{pname}")
            params[pname] = [model.check_value(method, pname, v, f"params.{pname}") for v in values]
        for pname, default in model.defaults(method).items():
            params.setdefault(pname, [default])
        missing = [p for p in model.param_names(method) if p not in params]
        if missing:
            raise SpecError(f"params.{missing[0]}", "required parameter has no value",
                            f"add {missing[0]} = ... under [params]")
        for pname, values in params.items():
            if len(set(map(repr, values))) != len(values):
                raise SpecError(f"params.{pname}", "repeated values", "list each value once")
        check_count(grid_size([len(v) for v in params.values()] + [len(v) for v in setting_axes.values()]),
                    "params")
        # Relations between parameters are checked on every point before anything runs.
        for point in _each_combination(params):
            model.check_point(method, point)
            for values in _each_combination(setting_axes):
                model.method(method).check(point, {**settings, **values})
    except ParameterError as exc:
        raise SpecError(exc.field, exc.message, exc.fix) from None

    return Sweep(name=name, title=str(raw.get("title", name)), description=str(raw.get("description", "")),
                 reference=str(raw.get("reference", "")), model=raw["model"], method=method, seed=seed,
                 params=params, settings=settings, plot=plot, source=source, text=text,
                 overrides=tuple(overrides), setting_axes=setting_axes)


AXIS_KINDS = ("int", "float")


def _setting_axes(model, method, raw_settings):
    """{setting: [values]} of the settings given several values (a list, a range or "start:stop:num"),
    each value checked; a setting that cannot be an axis is refused naming it."""
    spec, axes = model.method(method).settings, {}
    for key, value in raw_settings.items():
        if key not in spec or spec[key].kind in ("choices",) + LIST_KINDS:
            continue  # unknown settings are reported by check_settings; list settings take lists
        several = isinstance(value, (list, dict)) or (isinstance(value, str) and value.count(":") == 2)
        if not several:
            continue
        values = expand_values(value, f"method.{key}")
        if spec[key].kind not in AXIS_KINDS:
            raise SpecError(f"method.{key}", f"several values make a grid axis only of a numeric setting, and "
                            f"{key} is a {spec[key].kind}", "give one value; run one sweep per value (--name)")
        values = [spec[key].normalise(v, f"method.{key}") for v in values]
        if len(set(map(repr, values))) != len(values):
            raise SpecError(f"method.{key}", "repeated values", "list each value once")
        if len(values) > 1:
            axes[key] = values
        else:
            raw_settings[key] = values[0]
    clash = [k for k in axes if k in model.params]
    if clash:
        raise SpecError(f"method.{clash[0]}", "a setting axis may not share its name with a model parameter")
    return axes


def _check_layout_fixed(model, method, settings, setting_axes):
    """A setting axis must leave what a point stores unchanged (its variables and their dims' lengths)."""
    def shape_of(layout):
        return ({d: len(v) for d, v in layout.extra_dims.items()},
                {n: (v.dims, v.dtype) for n, v in layout.variables.items()})

    reference = shape_of(model.layout(method, settings))
    for key, values in setting_axes.items():
        for value in values[1:]:
            if shape_of(model.layout(method, {**settings, key: value})) != reference:
                raise SpecError(f"method.{key}", f"its values change what a point stores ({key} = {values[0]!r} "
                                f"and {value!r} give different dims)",
                                "give one value; run one sweep per value (--name)")


def expand_values(value, where):
    """A parameter value as a list: scalar, list, {start, stop, num[, scale]} or "start:stop:num"."""
    if isinstance(value, str) and value.count(":") == 2:
        parts = value.split(":")
        try:
            value = {"start": float(parts[0]), "stop": float(parts[1]), "num": int(parts[2])}
        except ValueError:
            raise SpecError(where, f"cannot read range {value!r}", "write start:stop:num, e.g. 0.1:2:20")
    if isinstance(value, dict):
        unknown = set(value) - {"start", "stop", "num", "scale"}
        if unknown or not {"start", "stop", "num"} <= set(value):
            raise SpecError(where, f"a range needs start, stop, num (and optionally scale), got {sorted(value)}",
                            "write { start = 0.1, stop = 2.0, num = 20 }")
        num = value["num"]
        if isinstance(num, bool) or not isinstance(num, int) or num < 1:
            raise SpecError(f"{where}.num", f"expected a positive integer, got {num!r}")
        check_count(num, f"{where}.num", "values")
        scale = value.get("scale", "linear")
        try:
            start, stop = float(value["start"]), float(value["stop"])
        except (TypeError, ValueError):
            raise SpecError(where, "start and stop must be numbers")
        if scale == "linear":
            grid = np.linspace(start, stop, num)
        elif scale == "log":
            if start <= 0 or stop <= 0:
                raise SpecError(where, "a log range needs start > 0 and stop > 0")
            grid = np.geomspace(start, stop, num)
        else:
            raise SpecError(f"{where}.scale", f"unknown scale {scale!r}", "use \"linear\" or \"log\"")
        return [canonical_float(v) for v in grid]
    if isinstance(value, list):
        if not value:
            raise SpecError(where, "empty list", "give at least one value")
        check_count(len(value), where, "values")
        return list(value)
    return [value]


def _refuse_infinite(value, where):
    """SpecError for an infinite number anywhere in a parameter's or setting's value ("1e400" reads as one):
    no parameter or setting takes one, and integer settings could not even compare with it."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float) and item in (float("inf"), float("-inf")):
            raise SpecError(where, f"{value!r} holds an infinite number", "give finite numbers")
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())


def _parse_cli_value(text):
    """--set values: numbers where they parse, strings otherwise ("true"/"false" are booleans)."""
    if text in ("true", "false"):
        return text == "true"
    for cast in (int, float):
        try:
            return cast(text)
        except ValueError:
            pass
    return text


def _apply_overrides(model, method, settings, params, overrides):
    settings, params = dict(settings), dict(params)
    setting_names = set(model.method(method).settings)
    for key, text in _override_items(overrides):
        if key.startswith("method."):
            key = key[len("method."):]
            if key not in setting_names:
                raise SpecError(f"--set {key}", f"method {method!r} has no setting {key!r}",
                                f"use one of {', '.join(sorted(setting_names))}")
        if key in model.params:
            if text.count(":") == 2:
                params[key] = text
            else:
                params[key] = [_parse_cli_value(v) for v in text.split(",")]
        elif key in setting_names:
            if text.count(":") == 2:
                settings[key] = text  # a range: a grid axis (checked by _setting_axes)
                continue
            values = [_parse_cli_value(v) for v in text.split(",")]
            kind = model.method(method).settings[key].kind
            # several values: a list for a list setting, a grid axis for a numeric one, refused otherwise
            settings[key] = values if kind in ("choices",) + LIST_KINDS or len(values) > 1 else values[0]
        else:
            raise SpecError(f"--set {key}", f"{key!r} is neither a parameter of model {model.name!r} nor a "
                            f"setting of method {method!r}",
                            f"use one of {', '.join(sorted(set(model.param_names(method)) | setting_names))}")
    return settings, params


def _override_items(overrides):
    """(NAME, VALUES text) of each --set override, in order (SpecError for one that is not NAME=VALUES)."""
    for item in overrides:
        if "=" not in item:
            raise SpecError("--set", f"{item!r} is not NAME=VALUES", "write e.g. --set alpha=0.5,1,2")
        key, _, text = item.partition("=")
        yield key.strip(), text


def _plugin_values(model, raw_params, overrides):
    """The raw values (spec and --set) of the parameters that may name plug-ins, as lists: what
    `Model.specialise` needs to add the plug-ins' own parameters before the others are checked."""
    values = {}
    for name, param in model.params.items():
        if not param.plugin:
            continue
        raw = raw_params.get(name)
        for key, text in _override_items(overrides):
            if key == name:
                raw = text.split(",")
        if raw is not None:
            values[name] = [v for v in (raw if isinstance(raw, list) else [raw]) if isinstance(v, str)]
    return values


def _each_combination(params):
    names = list(params)
    for combo in np.ndindex(*[len(params[n]) for n in names]):
        yield {n: params[n][i] for n, i in zip(names, combo)}


def canonical_json(obj):
    """Stable text for hashing: sorted keys, no whitespace, floats already canonical."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), allow_nan=False, default=_json_default)


def _json_default(obj):
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.floating):
        return canonical_float(obj)
    raise TypeError(f"cannot hash {type(obj).__name__}")


def sweep_from_resolved(resolved, text=""):
    """Rebuild a Sweep from the resolved form stored in a sweep group (for retry-failed): what a store holds
    is checked like a spec (a name, model and grid that a spec could not give are refused)."""
    where = "spec_resolved (stored)"
    fix = "restore the group from a copy, or run the sweep from its spec (seqphase run SPEC)"
    if not isinstance(resolved, dict) or not isinstance(resolved.get("params"), dict) or \
            not isinstance(resolved.get("settings"), dict) or not isinstance(resolved.get("setting_axes", {}), dict):
        raise SpecError(where, "not a resolved sweep", fix)
    name = resolved.get("name")
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name) or ".." in name:
        raise SpecError(f"{where}: name", f"{name!r} is not a valid sweep name", fix)
    if not isinstance(resolved.get("model"), str) or not isinstance(resolved.get("method"), str):
        raise SpecError(f"{where}: model", "model and method must be names", fix)
    seed = resolved.get("seed")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SpecError(f"{where}: seed", f"{seed!r} is not a non-negative integer", fix)
    axes = list(resolved["params"].values()) + list(resolved.get("setting_axes", {}).values())
    if not all(isinstance(v, list) and v for v in axes):
        raise SpecError(f"{where}: params", "each parameter must be a non-empty list of values", fix)
    check_count(grid_size(len(v) for v in axes), f"{where}: params")
    if not isinstance(resolved.get("overrides", []), list):
        raise SpecError(f"{where}: overrides", "must be a list", fix)
    return Sweep(name=resolved["name"], title=resolved.get("title", resolved["name"]), description="",
                 reference="", model=resolved["model"], method=resolved["method"], seed=resolved["seed"],
                 params={k: list(v) for k, v in resolved["params"].items()}, settings=resolved["settings"],
                 source=resolved.get("source", ""), text=text, overrides=tuple(resolved.get("overrides", ())),
                 setting_axes={k: list(v) for k, v in resolved.get("setting_axes", {}).items()})
