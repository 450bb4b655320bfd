"""The Python API: everything the `seqphase` command does, callable from a script or a notebook.

    import seqphase
    ds = seqphase.run("glm-perceptron-se", set={"alpha": "0.5:3:6"})        # these 6 points, an xarray.Dataset
    ds = seqphase.open_results("glm-perceptron-se")                          # every point stored of the sweep
    ds = seqphase.run({"name": "probit", "model": "glm", "params": {...}, "method": {"name": "se"}},
                      client=my_client)                                      # a Client you already hold
    seqphase.status("glm-perceptron-se").done
    seqphase.reproduce("bsr", quick=True)
    seqphase.list_sweeps()

The command line (cli.py) parses its options and calls these functions: one code path. A sweep is a
shipped name, a path to a .toml spec, or a dict with the spec's fields. `client` is a
`distributed.Client` you hold (a LocalCluster's, a dask-jobqueue SLURMCluster's): seqphase submits to
it and never closes it; without one, seqphase starts and stops its own cluster (`cluster`, `workers`).
An interrupt (Ctrl-C, a notebook's stop button) cancels what is in flight, keeps what was stored, and
is raised again as KeyboardInterrupt: run the same call to resume.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from seqphase.core.errors import SeqphaseError

__all__ = ["run", "retry_failed", "status", "reproduce", "list_sweeps", "check", "Status", "load"]


def load(sweep, set=None, name=None):  # noqa: A002 -- `set` mirrors the command line's --set
    """The validated `Sweep` of a shipped name, a spec path or a dict of the spec's fields; `set` is
    {parameter or setting: value(s)} or a list of "NAME=VALUES" strings (the command line's --set)."""
    from seqphase.sweeps.spec import load_sweep, parse_sweep

    overrides = _overrides(set)
    if isinstance(sweep, dict):
        text = json.dumps(sweep, indent=2, sort_keys=True, default=str)
        return parse_sweep(dict(sweep), source="<dict>", text=text, overrides=overrides, rename=name)
    if isinstance(sweep, Path):
        sweep = str(sweep)
    if not isinstance(sweep, str):
        raise SeqphaseError("sweep", f"expected a sweep name, a .toml path or a dict, got {type(sweep).__name__}")
    return load_sweep(sweep, overrides=overrides, rename=name)


def _overrides(values):
    if values is None:
        return ()
    if isinstance(values, dict):
        out = []
        for key, value in values.items():
            items = value if isinstance(value, (list, tuple)) else [value]
            out.append(f"{key}={','.join(_text(v) for v in items)}")
        return tuple(out)
    if isinstance(values, str):
        return (values,)
    return tuple(values)


def _text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def run(sweep, *, set=None, name=None, store=None, client=None, cluster="local", workers=None,  # noqa: A002
        retries=2, progress=True, slurm_profile=None, access=None):
    """Run a sweep, resuming, and return its results.

    Only points not already done in the store are computed. Points that still fail after `retries` are
    recorded in the store (``seqphase.status(...).failures``) and left NaN; a warning says how many.

    Parameters
    ----------
    sweep : str, pathlib.Path or dict
        A shipped sweep name (`list_sweeps`), a path to a ``.toml`` spec, or a dict with the spec's fields.
    set : dict or list of str, optional
        Overrides of parameters or method settings, as ``{"alpha": "0.5:3:6", "d": [250, 500]}`` or as the
        command line's ``["alpha=0.5:3:6", "d=250,500"]``. Several values make a grid axis.
    name : str, optional
        Store under this sweep name instead of the spec's.
    store : str or pathlib.Path, optional
        The zarr store (default ``$SEQPHASE_STORE``, else ``./seqphase.zarr``).
    client : distributed.Client, optional
        A client you hold (a LocalCluster's, a dask-jobqueue SLURMCluster's): the points are submitted to
        it and it is never closed. Without one, seqphase starts and stops its own cluster.
    cluster : str
        Without `client`: ``"local"`` (an embedded LocalCluster), ``"slurm"`` (with `slurm_profile`) or a
        scheduler address ``tcp://HOST:PORT`` / ``tls://HOST:PORT``.
    workers : int, optional
        Local worker processes (default: one per core).
    retries : int
        Retries of a point that raises before it is recorded as failed.
    progress : bool
        Show the progress meter (a line updated in place on a terminal or in Jupyter). Two lines, what
        runs and how it ended, go to stderr always.
    slurm_profile : seqphase.cluster.slurm.Profile, optional
        The SLURM profile (``seqphase.cluster.slurm.load_profile(path)``) for ``cluster="slurm"``.
    access : seqphase.cluster.security.Access, optional
        TLS and dashboard options of the cluster seqphase starts (default: TLS, no dashboard).

    Returns
    -------
    xarray.Dataset
        The points this call asked for (the sweep's grid with the `set` overrides), as `open_results` returns
        them. The store may hold more points of the sweep (other values of earlier runs):
        ``seqphase.open_results(sweep)`` opens them all.

    Raises
    ------
    seqphase.core.errors.SeqphaseError
        Bad input (spec, store, cluster): one line naming the field and the fix; nothing was written.
    KeyboardInterrupt
        After an interrupt: what was stored is kept; call again to resume.
    """
    swept = load(sweep, set=set, name=name)
    summary, store_path = execute(swept, "resume", store=store, client=client, cluster=cluster, workers=workers,
                                  retries=retries, progress=progress, slurm_profile=slurm_profile, access=access)
    return _dataset(swept.name, store_path, summary, grid=summary.grid)


def retry_failed(sweep, *, store=None, client=None, cluster="local", workers=None, retries=2, progress=True,
                 slurm_profile=None, access=None):
    """Rerun only the points of a stored sweep that are recorded as failed.

    The sweep is rebuilt from the spec stored with it, so its model must still be importable. For a
    point that failed on one seed, only that seed is rerun (the others were kept).

    Parameters
    ----------
    sweep : str
        The sweep's name in the store.
    store, client, cluster, workers, retries, progress, slurm_profile, access
        As for `run`.

    Returns
    -------
    xarray.Dataset
        The stored results.
    """
    swept = stored_sweep(sweep, store)
    summary, store_path = execute(swept, "retry-failed", store=store, client=client, cluster=cluster,
                                  workers=workers, retries=retries, progress=progress, slurm_profile=slurm_profile,
                                  access=access)
    return _dataset(swept.name, store_path, summary)


def stored_sweep(sweep, store=None):
    """The `Sweep` a store's group was run with (its resolved spec)."""
    from seqphase.results.query import sweep_name
    from seqphase.results.store import Store
    from seqphase.sweeps.spec import sweep_from_resolved

    group = Store(store).open_sweep(sweep_name(sweep))
    return sweep_from_resolved(json.loads(group.attrs.get("spec_resolved", "null")), text=group.attrs.get("spec", ""))


def _dataset(name, store_path, summary, grid=None):
    """The stored results of sweep `name`: the points of `grid` ({dim: values}) only, or all of them."""
    import warnings

    from seqphase.results.query import open_results, select_grid

    if summary.failed:
        warnings.warn(f"seqphase: {summary.failed} points of {name} failed and are recorded as failed in the "
                      f"store (seqphase.status({name!r}).failures; seqphase.retry_failed reruns them)", stacklevel=3)
    ds = open_results(name, store_path)
    return ds if grid is None else select_grid(ds, grid)


def _check_run_options(workers, retries):
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise SeqphaseError("--workers", f"{workers} is not a positive number", "use --workers 1 or more")
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise SeqphaseError("--retries", "must be >= 0")


@contextlib.contextmanager
def _client(client, cluster, workers, slurm_profile, access):
    """The caller's Client as it is (never closed here), or a cluster of our own for the duration (TLS
    with per-run credentials unless `access.insecure`: seqphase.cluster.security)."""
    if client is not None:
        if cluster != "local" or workers is not None or slurm_profile is not None or access is not None:
            raise SeqphaseError("client", "a client was given together with cluster options",
                                "give either client= or cluster=/workers=, not both")
        yield client
        return
    from seqphase.cluster import connect

    with connect(cluster, workers, slurm_profile=slurm_profile, access=access) as own:
        yield own


def _load_on_workers(client, model):
    """One task per worker of a cluster started for this run that imports the sweep's model family
    (`cluster.tasks.load_model`): the workers import it (1-2 s for a family that loads numba or
    scipy.stats) while the driver prepares the store, instead of when the first works arrive. The futures
    are kept until the run ends (a released future's task may be cancelled)."""
    from seqphase.cluster.tasks import load_model

    workers = list(client.scheduler_info()["workers"])
    return [client.submit(load_model, model, workers=[address], allow_other_workers=False, pure=False)
            for address in workers]


def execute(sweep, mode, *, store=None, client=None, cluster="local", workers=None, retries=2, progress=True,
            slurm_profile=None, access=None, stream=None):
    """Plan `sweep`, check the store (foreign, corrupted or locked: refused before anything starts), then
    run the points not done on the client and store them. Returns (RunSummary, store path)."""
    from seqphase.cluster import run_sweep
    from seqphase.results.faults import resource_error
    from seqphase.results.migrate import require_current_names
    from seqphase.results.store import Store
    from seqphase.sweeps.limits import check_plan_memory
    from seqphase.sweeps.planner import plan_sweep

    stream = stream or sys.stderr
    _check_run_options(workers, retries)
    plan = plan_sweep(sweep)
    # one instance must fit in a worker (a cluster given as a client or an address: not known, not checked)
    check_plan_memory(plan, cluster if client is None else None, workers, slurm_profile)
    store = Store(store)
    store.preflight(plan)  # refuse a foreign, corrupted or locked store before starting anything
    require_current_names(store, sweep.name)  # an old group (e.g. BSR `mmse`): migrate first
    started = False
    try:
        # Connect before touching the store: an unreachable cluster must leave it as it was.
        with _client(client, cluster, workers, slurm_profile, access) as active:
            loading = _load_on_workers(active, sweep.model) if client is None and cluster == "local" else []
            store.check(create=True)
            with store.lock():
                group = store.prepare(plan)
                started = True

                def announce(word):  # `run`, or `resume` when the store holds points of the grid already
                    stream.write(f"seqphase: {word} {sweep.name}: {len(plan.points)} points "
                                 f"({sweep.model}/{sweep.method}) -> {store.path}/{sweep.name}\n")

                ahead = slurm_profile.submit_ahead() if slurm_profile is not None and slurm_profile.adaptive else 0
                summary = run_sweep(plan, group, active, mode=mode, retries=retries, progress=progress,
                                    submit_ahead=ahead, stream=stream, announce=announce)
            del loading
    except OSError as exc:  # the store's file system: full, quota, read-only, permissions, open files
        error = resource_error(exc, store.path, during_run=started)
        if error is None:
            raise
        raise error from None
    why = f"; why they failed: seqphase status {sweep.name} --traceback" if summary.failed else ""
    stream.write(f"seqphase: {summary.line()}{why}\n")
    return summary, store.path


@dataclass
class Status:
    """What a store says of a sweep (returned by `status`).

    Attributes
    ----------
    name, model, method : str
        The sweep, its model and method.
    grid : dict
        Dim -> number of values.
    done, failed, pending, damaged, requested : int
        Points by state; damaged points sit in a chunk that fails its checksum or that a run wrote and
        is gone (`seqphase run` recomputes them).
    failures : list of (dict, str)
        Each failed point's parameters and reason.
    tracebacks : list of str
        The traceback of each failed point, in the order of `failures` ("" where the store has none: a
        worker killed, or a run that failed more points than it keeps tracebacks of).
    runs : list of dict
        One record per run: start, end, host, SLURM job, outcome, counts.
    text : str
        The report `seqphase status` prints (also ``str(status)``).
    """

    name: str
    model: str
    method: str
    grid: dict
    done: int
    failed: int
    pending: int
    damaged: int
    requested: int
    failures: list = field(default_factory=list)   # [(params, error)]
    tracebacks: list = field(default_factory=list)  # [traceback or ""], as failures
    runs: list = field(default_factory=list)
    text: str = ""

    def __str__(self):
        return self.text


def status(sweep, store=None, traceback=False):
    """Points done / failed / pending / damaged of a stored sweep, its failures and runs.

    Reads the store only (it changes no byte of it) and never asks SLURM.

    Parameters
    ----------
    sweep : str
        The sweep's name in the store.
    store : str or pathlib.Path, optional
        As for `run`.
    traceback : bool
        Print each failed point's traceback under it in the report (``seqphase status --traceback``).

    Returns
    -------
    Status
        Counts, failures, runs, and the printed report as ``text``.
    """
    from seqphase.results.lock import LOCK_NAME, judge, read_holder
    from seqphase.results.parts import Parts
    from seqphase.results.query import sweep_name
    from seqphase.results.store import STATUS_NAMES, Store
    from seqphase.results.verify import damage_summary, damaged_points, find_damage
    from seqphase.results.width import width_lines

    group = Store(store).open_sweep(sweep_name(sweep))
    codes, hashes = group.ledger()
    damages = find_damage(group)  # checksums and the manifest (fast); `seqphase verify` decodes everything
    damaged = damaged_points(group, damages)
    counts = Counter(int(s) for s in codes[~damaged].ravel())
    requested = int((codes != 0).sum() + (damaged & (codes == 0)).sum())
    lines = [f"sweep {group.name} ({group.attrs['model']}/{group.attrs['method']}) in {group.store.path}",
             "  grid: " + " x ".join(f"{d}[{len(group.coords[d])}]" for d in group.dims),
             "  points: " + ", ".join(f"{counts.get(code, 0)} {STATUS_NAMES[code]}" for code in (2, 3, 1))
             + (f", {int(damaged.sum())} damaged" if damaged.any() else "") + f" (of {requested} requested)"]
    if damages:
        lines.append(f"  damaged: {damage_summary(damages)}, {int(damaged.sum())} points affected "
                     "(seqphase verify lists them; seqphase run recomputes them)")
    lines += manifest_notes(group)
    if group.layout < 2:
        lines.append("  layout 1: one chunk per point, no checksums (seqphase migrate converts it)")
    errors = group.read_where("error", codes == 3)  # only the failed points' chunks
    kept = kept_tracebacks(group.attrs.get("runs", []))
    failures, tracebacks = [], []
    for index in zip(*(codes == 3).nonzero()):
        index = tuple(int(i) for i in index)
        params = group.cell_params(index)
        failures.append((params, str(errors[index])))
        tracebacks.append(kept.get(str(hashes[index]), ""))
        lines.append(f"  failed {params}: {failures[-1][1]}")
        if traceback and tracebacks[-1]:
            lines += ["      " + line for line in tracebacks[-1].rstrip("\n").splitlines()]
    if any(tracebacks) and not traceback:
        lines.append(f"  tracebacks of the failed points: seqphase status {group.name} --traceback")
    worker_jobs = Counter(str(j) for j in group.read("slurm_job_id")[codes == 2].ravel() if str(j))
    if worker_jobs:  # recorded per point by the workers (SLURM_JOB_ID); sacct is never asked
        ordered = sorted(worker_jobs.items(), key=lambda item: (len(item[0]), item[0]))
        lines.append("  slurm worker jobs (points done): " + ", ".join(f"{job} ({n})" for job, n in ordered))
    holder = read_holder(group.store.path / LOCK_NAME)
    live = holder is not None and not judge(group.store.path / LOCK_NAME, holder)
    lines += list(width_lines(group.attrs.get("runs", []), lambda: group.read("runtime_s")[codes == 2], live))
    kept = Parts(group.store.path, group.name).counts()
    if kept:  # a point cut into works keeps each finished one until the point is stored (results/parts.py)
        lines.append(f"  works kept of points not stored yet: {sum(kept.values())} in {len(kept)} point"
                     f"{'s' if len(kept) > 1 else ''} (" + ", ".join(f"{h[:12]}: {n}" for h, n in sorted(kept.items()))
                     + "); a run submits only their other works")
    unfinished = "running or killed" if live else "stopped before recording its outcome (killed, or the store " \
        "could not be written)"
    runs = list(group.attrs.get("runs", []))
    for record in runs:
        job = f" slurm job {record['slurm_job_id']}" if record.get("slurm_job_id") else ""
        lines.append(f"  run {record.get('started_at')} {record.get('mode')} on {record.get('host')}{job}: "
                     f"{record.get('submitted')} submitted, {record.get('done', '?')} done, "
                     f"{record.get('failed', '?')} failed, {record.get('outcome', unfinished)}")
    return Status(name=group.name, model=group.attrs["model"], method=group.attrs["method"],
                  grid={d: len(group.coords[d]) for d in group.dims}, done=counts.get(2, 0),
                  failed=counts.get(3, 0), pending=counts.get(1, 0), damaged=int(damaged.sum()),
                  requested=requested, failures=failures, tracebacks=tracebacks, runs=runs, text="\n".join(lines))


def kept_tracebacks(runs):
    """{point hash: traceback} from the run records, the latest run's where several failed the point; entries
    that are not what a run writes are skipped (the records come from a store)."""
    kept = {}
    for record in runs if isinstance(runs, list) else []:
        entries = record.get("tracebacks") if isinstance(record, dict) else None
        for entry in entries if isinstance(entries, list) else []:
            if isinstance(entry, dict) and isinstance(entry.get("point"), str) and \
                    isinstance(entry.get("traceback"), str):
                kept[entry["point"]] = entry["traceback"]
    return kept


def manifest_notes(group):
    """When the group cannot tell a deleted chunk from one never written, say so (status, verify)."""
    if group.layout < 2:
        return []
    if group.manifest is None:
        return ["  no chunk manifest (written by an older seqphase): a deleted chunk file cannot be told from one "
                "never written; the next `seqphase run` starts one"]
    if not group.manifest.complete:
        return [f"  chunk manifest kept since {group.manifest.data.get('since')}: chunk files deleted before then "
                "cannot be told from ones never written"]
    return []


def list_sweeps(unloadable=None):
    """The shipped sweeps, sorted by name.

    Parameters
    ----------
    unloadable : list, optional
        Where a sweep that cannot be loaded (its spec, or its family's model module, fails) is noted, one line
        each, and left out; by default its error is raised.

    Returns
    -------
    list of dict
        One ``{"name", "model", "method", "points", "title", "cost"}`` per sweep the installed model families
        ship (``core/<family>/sweeps/`` for seqphase's own);
        ``cost`` is its measured `seqphase.sweeps.costs.SweepCost` (CPU-s, how it was measured, the
        command), or None.
    """
    from seqphase.sweeps.costs import sweep_cost
    from seqphase.sweeps.spec import load_sweep, shipped_specs

    out = []
    for name in sorted(shipped_specs()):
        try:
            sweep = load_sweep(name)
        except SeqphaseError as exc:
            if unloadable is None:
                raise
            unloadable.append(f"sweep {name!r} cannot be loaded: {exc.one_line()}")
            continue
        size = 1
        for values in sweep.params.values():
            size *= len(values)
        out.append({"name": name, "model": sweep.model, "method": sweep.method, "points": size,
                    "title": sweep.title, "cost": sweep_cost(name)})
    return out


def reproduce(paper, *, quick=False, store=None, output=None, client=None, cluster="local", workers=None,
              retries=2, progress=True, slurm_profile=None, access=None, stream=None):
    """Run every sweep of a paper on one cluster and write its report folder.

    What is stored already is resumed. The report is one offline page, ``index.html``, with a figure per
    sweep, the agreement table with the published data (also ``agreement.csv``) and provenance.

    Parameters
    ----------
    paper : str
        A paper id: ``glm``, ``multiindex``, ``smi``, ``aim``, ``quadratic``, ``erm``, ``bsr``
        (``seqphase reproduce --list``).
    quick : bool
        Run the reduced grids the report lists, stored as ``NAME.quick``.
    output : str or pathlib.Path, optional
        The report folder (default ``./reproduce-PAPER`` or ``./reproduce-PAPER-quick``).
    store, client, cluster, workers, retries, progress, slurm_profile, access
        As for `run`.
    stream : file, optional
        Where the progress lines go (default stderr).

    Returns
    -------
    tuple
        ``(path of index.html, agreement rows, number of failed points)``; each row
        (``seqphase.core.agreement.Row``) holds the figure, curve, quantity, ours, published, deviation,
        tolerance, where the tolerance comes from, and the verdict.
    """
    from seqphase.cluster import run_sweep
    from seqphase.results.migrate import require_current_names
    from seqphase.results.report import MARKER
    from seqphase.results.reproduce import write
    from seqphase.results.store import Store
    from seqphase.sweeps.limits import check_plan_memory
    from seqphase.sweeps.papers import get_paper
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep

    stream = stream or sys.stderr
    paper = get_paper(paper)
    _check_run_options(workers, retries)
    out = Path(output or f"reproduce-{paper.id}{'-quick' if quick else ''}")
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / MARKER).is_file())):
        raise SeqphaseError("-o", f"{out} exists and is not a seqphase report folder",
                            "give a new or empty folder (-o DIR); nothing was written")
    plans = [(item, plan_sweep(load_sweep(item.spec, overrides=item.overrides(quick),
                                          rename=item.stored_name(quick)))) for item in paper.runs]
    store = Store(store)
    for _, plan in plans:
        check_plan_memory(plan, cluster if client is None else None, workers, slurm_profile)
        store.preflight(plan)  # a foreign, corrupted or locked store, other settings: refused before anything
        require_current_names(store, plan.sweep.name)
    timings, failed = {}, 0
    with _client(client, cluster, workers, slurm_profile, access) as active:
        store.check(create=True)
        with store.lock():
            for _, plan in plans:
                started = time.perf_counter()
                group = store.prepare(plan)
                stream.write(f"seqphase: reproduce {paper.id}: {plan.sweep.name}: {len(plan.points)} points\n")
                summary = run_sweep(plan, group, active, retries=retries, progress=progress, stream=stream)
                failed += summary.failed
                timings[plan.sweep.name] = {"points": len(plan.points), "computed": summary.done,
                                            "wall_s": time.perf_counter() - started,
                                            "spec_hash": plan.identity_hash}
    rows = write(paper, quick, store, out, plans, timings)
    return out / "index.html", rows, failed


def check(target, *, set=None, seed=0):  # noqa: A002
    """Run the identity battery on a user channel or prior (``seqphase check``).

    The battery (`seqphase.testing`): the Nishimori identities with labels drawn by the plug-in's
    sampler, finite-difference Jacobians, a batch equal to its samples one by one, finite values at the
    edges, and the plug-in's own closed forms against the derived ones.

    Parameters
    ----------
    target : str
        ``"module:Class"`` of a `seqphase.Likelihood` or `seqphase.Prior`, or a short name an installed
        package registers.
    set : dict or list of str, optional
        Constructor keywords, ``{keyword: value}`` or ``"NAME=V"`` strings; the others take their defaults.
    seed : int
        Seed of the battery's draws.

    Returns
    -------
    tuple
        ``(kind, rows)``: ``"channel"`` or ``"prior"``, and one row per identity with ``identity``,
        ``measured``, ``tolerance`` and ``passes``.

    Raises
    ------
    seqphase.core.errors.SeqphaseError
        The class cannot be imported, is not a plug-in, raises in its constructor or methods, returns NaN
        or the wrong shapes.
    """
    from seqphase.core import plugins
    from seqphase.testing import likelihood_rows, prior_rows

    kind, info = plugins.load_either(target, "MODULE:CLASS")
    keywords = plugins.parameters(info.cls, "MODULE:CLASS")
    values = {}
    for item in _overrides(set):
        key, _, text = item.partition("=")
        key = key.strip()
        if key not in keywords:
            raise SeqphaseError(f"--set {key}", f"{info.qualname} takes no keyword {key!r}",
                                f"use one of {', '.join(keywords) or '(none)'}")
        from seqphase.sweeps.spec import _parse_cli_value

        values[key] = _parse_cli_value(text)
    for key, default in keywords.items():
        if key not in values:
            if default is plugins.REQUIRED_VALUE:
                raise SeqphaseError(f"--set {key}", "required keyword of the plug-in has no value", f"add --set {key}=...")
            values[key] = default
    plugin = plugins.instantiate(info, values, "MODULE:CLASS")
    plugins.smoke_test(plugin, kind, "MODULE:CLASS")
    if kind == "channel":
        rows = likelihood_rows(plugin, target, seed=seed)
    else:
        rows = prior_rows(plugin, target, seed=seed)
    return kind, rows
