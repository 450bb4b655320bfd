"""A tiny user model for the engine tests ("toymodel:ToyModel" in a spec).

It exercises the path spec -> tasks -> workers -> store without physics: a closed-form value, an
optional sleep (so a sweep can be interrupted mid-way) and injected failures.
"""

import os
import time
from pathlib import Path

import numpy as np

from seqphase.core.models import REQUIRED, Layout, Method, Model, Param, SeededMethod, Variable, Work, drive


class ToySE(Method):
    """The toy's only method: a closed form, plus three draws of the point's random stream."""

    def layout(self, settings):
        return Layout({"row": np.arange(1, 2), "col": np.arange(1, 2), "seed": np.arange(3)},
                      {"overlap": Variable(("row", "col"), "f8", "alpha/(1+alpha)"),
                       "gen_error": Variable((), "f8", "1 - overlap"),
                       "noise": Variable(("seed",), "f8", "three draws of the point's stream")})

    def run(self, params, settings, seed_sequence):
        time.sleep(params["sleep"])
        if params["fail"] == "always":
            raise RuntimeError(f"injected failure at alpha={params['alpha']}")
        if params["fail"] == "once":
            marker = Path(os.environ["TOYMODEL_MARKERS"]) / f"{params['alpha']!r}"
            if not marker.exists():
                marker.write_text("failed once")
                raise RuntimeError(f"injected one-off failure at alpha={params['alpha']}")
        value = settings["scale"] * params["alpha"] / (1.0 + params["alpha"])
        noise = np.random.default_rng(seed_sequence).standard_normal(3)
        return {"overlap": np.full((1, 1), value), "gen_error": 1.0 - value, "noise": noise}


class ToySeeded(SeededMethod):
    """A method cut into seeds: each seed sleeps `sleep` seconds, draws from its own stream and records
    the process it ran in; `fail` makes seed 1 raise (always, or once per alpha)."""

    shared = True

    def layout(self, settings):
        return Layout({"seed": np.arange(settings["n_seeds"])},
                      {"noise": Variable(("seed",), "f8", "a draw of the seed's stream"),
                       "pid": Variable(("seed",), "i8", "process that ran the seed"),
                       "value": Variable((), "f8", "alpha/(1+alpha), shared by the seeds")})

    def run_seed(self, params, settings, stream):
        seed = stream.spawn_key[-1]
        time.sleep(params["sleep"] + (settings["tail"] if seed == 0 else 0.0))
        if seed == 1 and params["fail"] == "always":
            raise RuntimeError(f"injected failure of seed 1 at alpha={params['alpha']}")
        if seed == 1 and params["fail"] == "once":
            marker = Path(os.environ["TOYMODEL_MARKERS"]) / f"seed-{params['alpha']!r}-{settings['tail']!r}"
            if not marker.exists():
                marker.write_text("failed once")
                raise RuntimeError(f"injected one-off failure of seed 1 at alpha={params['alpha']}")
        return {"noise": np.random.default_rng(stream).standard_normal(), "pid": os.getpid()}

    def run_shared(self, params, settings, seed_sequence):
        return {"value": params["alpha"] / (1.0 + params["alpha"])}


def toy_probe(x, root, sleep, fail, key):
    """A probe of ToySearch: is x above the root? Sleeps `sleep` s; `fail` makes probe "search-1-1" raise
    (always, or once per root)."""
    time.sleep(sleep)
    if key == "search-1-1" and fail == "always":
        raise RuntimeError(f"injected failure of probe {key} at x={x!r}")
    if key == "search-1-1" and fail == "once":
        marker = Path(os.environ["TOYMODEL_MARKERS"]) / f"probe-{root!r}"
        if not marker.exists():
            marker.write_text("failed once")
            raise RuntimeError(f"injected one-off failure of probe {key} at x={x!r}")
    return x > root


class ToySearch(Method):
    """A root search as a graph (core/search.py): the switch of x > alpha on [0, 4] in rounds of k probes,
    and a closed-form work beside it; `fail` makes probe "search-1-1" raise."""

    def layout(self, settings):
        return Layout({}, {"root": Variable((), "f8", "the search's value"),
                           "lo": Variable((), "f8", "final bracket, low end"),
                           "hi": Variable((), "f8", "final bracket, high end"),
                           "value": Variable((), "f8", "alpha/(1+alpha), a work beside the search")})

    def tasks(self, params, settings, seed_sequence):
        from seqphase.core.search import section_search, side_by_side, single

        def probe(x):
            return toy_probe, {"x": x, "root": params["alpha"], "sleep": params["sleep"], "fail": params["fail"]}

        search = section_search("search", probe, 0.0, 4.0, settings["rtol"], settings["k"])
        search = _with_keys(search)
        (root, lo, hi), value = yield from side_by_side(
            [search, single(Work("closed", closed_form, {"alpha": params["alpha"]}))])
        return {"root": root, "lo": lo, "hi": hi, "value": value}

    def run(self, params, settings, seed_sequence):
        return drive(self.tasks(params, settings, seed_sequence))


def _with_keys(route):
    """Pass each probe work its own key (a route around a route)."""
    results = None
    try:
        while True:
            works = next(route) if results is None else route.send(results)
            results = yield [Work(w.key, w.fn, dict(w.kwargs, key=w.key)) for w in works]
    except StopIteration as stop:
        return stop.value


def closed_form(alpha):
    return alpha / (1.0 + alpha)


class ToyModel(Model):
    def __init__(self):
        super().__init__(
            name="toymodel:ToyModel",
            description="closed-form toy with injectable failures",
            params={
                "alpha": Param("alpha", "float", "sample complexity", REQUIRED, low=0.0),
                "fail": Param("fail", "choice", "inject a failure", "never", choices=("never", "always", "once")),
                "sleep": Param("sleep", "float", "seconds to sleep", 0.0, low=0.0, low_inclusive=True),
                # An int parameter: stored as a float coordinate, it must hash as an int on retry.
                "copies": Param("copies", "int", "unused integer parameter", 1, low=1, low_inclusive=True),
            },
            methods={"se": ToySE({"scale": Param("scale", "float", "output scale", 1.0, low=0.0)}, version=1,
                                 doc="closed form"),
                     "seeded": ToySeeded({"n_seeds": Param("n_seeds", "int", "seeds", 4, low=1, low_inclusive=True),
                                          "tail": Param("tail", "float", "extra seconds seed 0 sleeps", 0.0, low=0.0,
                                                        low_inclusive=True)},
                                         version=1, doc="seeds as tasks"),
                     "search": ToySearch({"k": Param("k", "int", "probes a round", 3, low=2, low_inclusive=True),
                                          "rtol": Param("rtol", "float", "relative bracket width", 1e-3, low=0.0)},
                                         version=1, doc="a root search in rounds of probes")},
        )
