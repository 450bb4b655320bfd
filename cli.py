"""The `seqphase` command: thin; each subcommand delegates to sweeps/, cluster/ and results/.

    seqphase run SWEEP [--set NAME=V1,V2,... | NAME=start:stop:num]... [--store PATH]
                       [--cluster local|slurm|ADDRESS] [--workers N] [--name NAME] [--retries N]
                       [--profile FILE] [--jobs N] [--partition P] [--walltime T]
    seqphase submit SWEEP [--set ...]... [--store PATH] [--name NAME] [--retries N] [--retry-failed]
                          [--profile FILE] [--jobs N] [--partition P] [--walltime T]
    seqphase list
    seqphase check MODULE:CLASS [--set NAME=V]...
    seqphase status SWEEP [--traceback] [--store PATH]
    seqphase query SWEEP [--format csv|json] [--all] [--store PATH] [-o FILE]
    seqphase plot SWEEP -o FILE.png [--store PATH] [--import-model]
    seqphase retry-failed SWEEP [--store PATH] [--cluster ...] [--workers N]
    seqphase verify SWEEP [--store PATH]
    seqphase migrate [SWEEP ...] [--store PATH]
    seqphase reproduce PAPER [--quick] [--store PATH] [-o DIR] [--cluster ...] [--workers N]
    seqphase reproduce --list
    seqphase --version

Bad input (unknown sweep, model or parameter, a value out of range, a malformed spec, a foreign or
corrupted store) prints one line naming the field and the fix, exits with code 2 and writes nothing.
"""

from __future__ import annotations

import argparse
import json
import sys

from seqphase.core.errors import SeqphaseError

EXIT_BAD_INPUT = 2
EXIT_FAILED_POINTS = 1
STDOUT_COMMANDS = ("list", "query", "status", "verify", "submit", "check")  # a closed stdout ends these quietly
# The commands that compute with a user's own class ("module:Class" in a spec, --set or the check target), so
# may import it from the working folder. The others only read: a folder next to a store someone handed over
# may hold a module of theirs, and nothing of it may run.
USER_CODE_COMMANDS = ("run", "submit", "check", "retry-failed")


def build_parser():
    from seqphase.version import __version__

    parser = argparse.ArgumentParser(prog="seqphase", description="Phase-diagram sweeps: SE, GAMP, thresholds.")
    parser.add_argument("--version", action="version", version=f"seqphase {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    def add_store(p):
        p.add_argument("--store", default=None, help="zarr store (default $SEQPHASE_STORE, else ./seqphase.zarr)")

    def add_slurm(p):
        p.add_argument("--profile", default=None, metavar="FILE",
                       help="SLURM profile .toml: partition, cores, memory, walltime, ... (docs/howto/slurm.md)")
        p.add_argument("--jobs", default=None, help="SLURM worker jobs to keep running, or `auto`: adaptive between "
                       "the profile's min_jobs and max_jobs (profile: jobs)")
        p.add_argument("--partition", default=None, help="SLURM partition (overrides the profile)")
        p.add_argument("--walltime", default=None, help="worker jobs' SLURM time limit (overrides the profile)")

    def add_access(p, attach=True):
        p.add_argument("--insecure-no-tls", action="store_true",
                       help="start the scheduler on plain tcp://, without TLS: no authentication, no encryption; "
                       "anyone who can reach its port (on a shared node, every local user) can run code as you")
        p.add_argument("--dashboard", action="store_true", help="serve Dask's dashboard on the driver's node, bound "
                       "to 127.0.0.1, and print the ssh tunnel command that reaches it")
        if attach:
            p.add_argument("--tls-dir", default=None, metavar="DIR", help="with --cluster tls://HOST:PORT: the "
                           "client's credentials ca.pem, cert.pem, key.pem (default: Dask's distributed.comm.tls config)")

    def add_cluster(p):
        p.add_argument("--cluster", default="local",
                       help="`local` (embedded Dask cluster), `slurm` (worker jobs) or a scheduler address "
                       "(tcp:// or tls://)")
        add_access(p)
        p.add_argument("--workers", type=int, default=None, help="local workers (default: one per core)")
        p.add_argument("--retries", type=int, default=2, help="retries of a point that raises (default 2)")
        p.add_argument("--no-progress", action="store_true", help="no progress line")
        add_slurm(p)

    run = sub.add_parser("run", help="run a sweep (resumes: only points not done are computed)")
    run.add_argument("sweep", help="shipped sweep name (seqphase list) or path to a .toml spec")
    run.add_argument("--set", action="append", default=[], metavar="NAME=VALUES",
                     help="override a parameter (V1,V2,... or start:stop:num) or a method setting")
    run.add_argument("--name", default=None, help="store under this sweep name instead of the spec's")
    add_store(run)
    add_cluster(run)

    submit = sub.add_parser("submit", help="submit the driver of a sweep as a SLURM job (prints its job id)")
    submit.add_argument("sweep", help="shipped sweep name (seqphase list) or path to a .toml spec")
    submit.add_argument("--set", action="append", default=[], metavar="NAME=VALUES",
                        help="override a parameter (V1,V2,... or start:stop:num) or a method setting")
    submit.add_argument("--name", default=None, help="store under this sweep name instead of the spec's")
    submit.add_argument("--retries", type=int, default=2, help="retries of a point that raises (default 2)")
    submit.add_argument("--retry-failed", action="store_true",
                        help="rerun only the points recorded as failed (like `seqphase retry-failed`)")
    add_store(submit)
    add_slurm(submit)
    add_access(submit, attach=False)

    sub.add_parser("list", help="list the sweeps the installed model families ship")

    check = sub.add_parser("check", help="run the identity battery on a user channel or prior (a "
                           "seqphase.Likelihood or seqphase.Prior): exit 0 if every identity holds, 1 if one fails")
    check.add_argument("target", metavar="MODULE:CLASS", help="the plug-in, \"module:Class\" or a registered name")
    check.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                       help="a constructor keyword (default: the class's default)")

    status = sub.add_parser("status", help="points done / failed / pending, and the runs so far")
    status.add_argument("sweep")
    status.add_argument("--traceback", action="store_true", help="print each failed point's traceback under it")
    add_store(status)

    query = sub.add_parser("query", help="print stored results as a table")
    query.add_argument("sweep")
    query.add_argument("--format", choices=("csv", "json"), default="csv")
    query.add_argument("--all", action="store_true", help="also rows of points not done")
    query.add_argument("-o", "--output", default=None, help="write to a file instead of stdout")
    add_store(query)

    plot = sub.add_parser("plot", help="draw the sweep's figure as PNG")
    plot.add_argument("sweep")
    plot.add_argument("-o", "--output", required=True, help="PNG file to write")
    plot.add_argument("--import-model", action="store_true", help="import the user model the store names "
                      "(\"module:Class\") to draw its own figure (default: only shipped models are imported)")
    add_store(plot)

    retry = sub.add_parser("retry-failed", help="rerun only the points recorded as failed")
    retry.add_argument("sweep")
    add_store(retry)
    add_cluster(retry)

    verify = sub.add_parser("verify", help="read every chunk of a sweep and list the points whose data is damaged")
    verify.add_argument("sweep")
    add_store(verify)

    migrate = sub.add_parser("migrate", help="convert sweeps stored one chunk per point to chunks of many "
                             "points with checksums (all sweeps of the store if none is named)")
    migrate.add_argument("sweeps", nargs="*", metavar="SWEEP")
    add_store(migrate)

    reproduce = sub.add_parser("reproduce", help="run every sweep of a paper and write DIR/index.html: figures, "
                               "the agreement table with the published data, provenance")
    reproduce.add_argument("paper", nargs="?", help="paper id (seqphase reproduce --list)")
    reproduce.add_argument("--list", action="store_true", help="list the papers: id, title, arXiv, sweeps, cost")
    reproduce.add_argument("--quick", action="store_true", help="reduced grids (stated in the report), each "
                           "paper in under 10 minutes on 2 cores")
    reproduce.add_argument("-o", "--output", default=None, help="report folder (default ./reproduce-PAPER[-quick])")
    add_store(reproduce)
    add_cluster(reproduce)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.command in USER_CODE_COMMANDS or getattr(args, "import_model", False):
        _plugins_from_working_folder()
    try:
        return COMMANDS[args.command](args)
    except BrokenPipeError:
        if args.command not in STDOUT_COMMANDS:
            raise
        return _closed_pipe()
    except SeqphaseError as exc:
        print(f"seqphase: error: {exc.one_line()}", file=sys.stderr)
        return EXIT_FAILED_POINTS if getattr(exc, "during_run", False) else EXIT_BAD_INPUT
    except OSError as exc:  # a full, read-only or forbidden store, too many open files: one line
        from seqphase.results.faults import resource_error

        error = resource_error(exc, getattr(args, "store", None) or _default_store())
        if error is None:
            raise
        print(f"seqphase: error: {error.one_line()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print("seqphase: interrupted; points already stored are kept, rerun to resume", file=sys.stderr)
        return 130


def _plugins_from_working_folder():
    """A plug-in ("mymodule:Probit") in the folder the command runs from is importable, as under
    `python -m`; local workers inherit the driver's path (multiprocessing passes sys.path on)."""
    import os

    here = os.getcwd()
    if here not in sys.path and "" not in sys.path:
        sys.path.insert(0, here)


def _closed_pipe():
    """The reader of our output went away (`seqphase query ... | head`): end quietly, exit 0. Python
    would report the broken pipe again when it flushes stdout at exit, so stdout goes to /dev/null."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 0


def _default_store():
    from seqphase.results.schema import DEFAULT_STORE

    return DEFAULT_STORE


def cmd_run(args):
    from seqphase.sweeps.spec import load_sweep

    sweep = load_sweep(args.sweep, overrides=args.set, rename=args.name)
    return _execute(sweep, args, mode="resume")


def cmd_retry_failed(args):
    from seqphase import api

    return _execute(api.stored_sweep(args.sweep, args.store), args, mode="retry-failed")


def _execute(sweep, args, mode):
    from seqphase import api

    api._check_run_options(args.workers, args.retries)
    summary, _ = api.execute(sweep, mode, store=args.store, cluster=args.cluster, workers=args.workers,
                             retries=args.retries, progress=not args.no_progress, slurm_profile=_slurm_profile(args),
                             access=_access(args))
    return EXIT_FAILED_POINTS if summary.failed else 0


def _slurm_profile(args):
    """The SLURM profile for `--cluster slurm` (checked here, before anything starts); None otherwise."""
    slurm_options = [o for o, v in (("--profile", args.profile), ("--jobs", args.jobs),
                                     ("--partition", args.partition), ("--walltime", args.walltime)) if v is not None]
    if args.cluster != "slurm":
        if slurm_options:
            raise SeqphaseError(slurm_options[0], "applies to --cluster slurm only",
                                "add --cluster slurm, or use `seqphase submit`")
        return None
    if args.workers is not None:
        raise SeqphaseError("--workers", "applies to local clusters only",
                            "with SLURM use --jobs N (worker jobs) and `processes` in the profile")
    from seqphase.cluster.slurm import load_profile

    return load_profile(args.profile, jobs=args.jobs, partition=args.partition, walltime=args.walltime)


def _access(args):
    """TLS and dashboard options (cluster/security.py)."""
    from seqphase.cluster.security import Access

    return Access(insecure=args.insecure_no_tls, tls_dir=getattr(args, "tls_dir", None), dashboard=args.dashboard)


def cmd_submit(args):
    """Check everything (spec, store, profile, both job scripts) and only then sbatch the driver."""
    from pathlib import Path

    from seqphase.cluster import slurm
    from seqphase.results.query import sweep_name
    from seqphase.results.store import FAILED, Store, SweepGroup
    from seqphase.sweeps.planner import plan_sweep
    from seqphase.sweeps.spec import load_sweep, shipped_specs, sweep_from_resolved

    if args.retries < 0:
        raise SeqphaseError("--retries", "must be >= 0")
    store = Store(args.store)
    store.path = store.path.resolve()  # the driver job may start elsewhere: absolute paths only
    store.check(allow_missing=True)
    if args.retry_failed:
        if args.set or args.name:
            raise SeqphaseError("--retry-failed", "reruns the stored sweep as it is", "leave out --set and --name")
        group = store.open_sweep(sweep_name(args.sweep))
        plan = plan_sweep(sweep_from_resolved(json.loads(group.attrs.get("spec_resolved", "null")),
                                              text=group.attrs.get("spec", "")))
        name = group.name
        command = ["retry-failed", name]
        what = f"{int((group.ledger()[0] == FAILED).sum())} failed points"
    else:
        sweep = load_sweep(args.sweep, overrides=args.set, rename=args.name)
        plan = plan_sweep(sweep)
        name = sweep.name
        what = f"{len(plan.points)} points"
        if (store.path / name / "zarr.json").is_file():
            SweepGroup(store, name, repair=False).check_identity(plan)  # refuse now what the driver would refuse later
        spec = args.sweep if args.sweep in shipped_specs() else str(Path(args.sweep).resolve())
        command = ["run", spec] + [x for s in args.set for x in ("--set", s)] + \
                  (["--name", args.name] if args.name else [])
    _check_not_locked(store)
    profile = slurm.load_profile(args.profile, jobs=args.jobs, partition=args.partition, walltime=args.walltime)
    from seqphase.sweeps.limits import check_plan_memory

    check_plan_memory(plan, "slurm", slurm_profile=profile)  # what the driver job would refuse
    cwd = Path.cwd()
    log_directory = slurm.log_directory_of(profile, cwd)
    slurm.credentials_parent(profile, cwd)  # the driver makes the run's TLS credentials there: checked now
    command = [sys.executable, "-m", "seqphase.cli"] + command + [
        "--store", str(store.path), "--cluster", "slurm", "--jobs", str(profile.jobs),
        "--retries", str(args.retries)]
    if args.profile:
        command += ["--profile", str(Path(args.profile).resolve())]
    for option, value in (("--partition", args.partition), ("--walltime", args.walltime)):
        if value is not None:
            command += [option, value]
    command += [flag for flag, on in (("--insecure-no-tls", args.insecure_no_tls), ("--dashboard", args.dashboard)) if on]
    script = slurm.driver_job_script(profile, command, f"{slurm.DRIVER_JOB_PREFIX}-{name}", log_directory, cwd)
    slurm.check_profile(profile, log_directory, driver_script=script)
    log_directory.mkdir(parents=True, exist_ok=True)
    job_id = slurm.submit_driver(script)
    print(job_id)
    print(f"seqphase: submitted driver job {job_id} for {name} ({what}; {profile.summary()})\n"
          f"seqphase: driver log {log_directory}/{slurm.DRIVER_JOB_PREFIX}-{job_id}.out; "
          f"follow with: seqphase status {name} --store {store.path}", file=sys.stderr)
    return 0


def _check_not_locked(store):
    """Refuse to submit while another driver holds the store's lock (test only, nothing written)."""
    store.check_unlocked()


def cmd_list(args):
    from seqphase.api import list_sweeps

    unloadable = []
    rows = [[row["name"], f"{row['model']}/{row['method']}", str(row["points"]), _cpu_cell(row["cost"]), row["title"]]
            for row in list_sweeps(unloadable)]
    _print_lines(columns([["sweep", "model/method", "points", "CPU-s", "title"]] + rows, right={2, 3}))
    _note_left_out(unloadable)
    return 0


def _note_left_out(unloadable):
    """One line on stderr per installed model family that could not be loaded and per sweep or family's
    papers (`unloadable`) that could not: a broken family is left out of the lists, never the end of them."""
    from seqphase.core.family import broken

    for line in list(broken()) + list(unloadable):
        print(f"seqphase: note: {line}; left out", file=sys.stderr)


def _cpu_cell(cost):
    """A sweep's CPU-s in `list`: "~" where estimated from a subset of its points, "?" without a record."""
    if cost is None:
        return "?"
    return ("" if cost.whole else "~") + f"{cost.cpu_s:,.0f}"


def columns(rows, right=()):
    """Lines of `rows` (lists of strings, the first one a header) in columns two spaces apart, each column
    as wide as its widest cell; the columns whose index is in `right` aligned right, the last one unpadded."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    last = len(widths) - 1
    return ["  ".join(cell.rjust(w) if i in right else cell if i == last else cell.ljust(w)
                      for i, (cell, w) in enumerate(zip(row, widths))) for row in rows]


def cmd_check(args):
    from seqphase.api import check

    kind, rows = check(args.target, set=args.set)
    from seqphase.testing import table

    print(f"{args.target} ({kind})")
    print(table(rows))
    failing = [row for row in rows if not row.passes]
    for row in failing:
        print(f"seqphase: check: {args.target}: {row.identity}: {row.measured:.3g} > tolerance {row.tolerance:.2g}",
              file=sys.stderr)
    return EXIT_FAILED_POINTS if failing else 0


def cmd_status(args):
    from seqphase.api import status

    print(status(args.sweep, args.store, traceback=args.traceback).text)
    return 0


def cmd_query(args):
    import os

    from seqphase.results.query import write_table

    if not args.output:
        write_table(args.sweep, args.store, sys.stdout, fmt=args.format, include_all=args.all)
        return 0
    _check_output_file(args.output)
    tmp = f"{args.output}.{os.getpid()}.partial"  # the file appears whole or not at all
    try:
        with open(tmp, "w") as handle:
            write_table(args.sweep, args.store, handle, fmt=args.format, include_all=args.all)
        os.replace(tmp, args.output)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return 0


def _check_output_file(path):
    """SeqphaseError (-o) unless `path` can be written as a file: not a folder, its folder exists."""
    from pathlib import Path

    path = Path(path)
    if path.is_dir():
        raise SeqphaseError("-o", f"{path} is a folder", "give a file name, e.g. -o table.csv")
    if not path.parent.is_dir():
        raise SeqphaseError("-o", f"the folder {path.parent} does not exist", "create it first, or give another path")


def cmd_verify(args):
    """Decode every chunk of the sweep; list damaged chunks and the points they hold. Exit 1 if any."""
    from seqphase.api import manifest_notes
    from seqphase.results.query import sweep_name
    from seqphase.results.store import Store
    from seqphase.results.verify import MISSING, damage_summary, damaged_mask, find_damage, never_written

    group = Store(args.store).open_sweep(sweep_name(args.sweep))
    damages = find_damage(group, thorough=True)
    chunks = sum(1 for _ in group.folder.rglob("c/**/*") if _.is_file() and not _.name.endswith(".partial"))
    layout = "chunks of many points, crc32c checksums" if group.layout >= 2 else \
        "one chunk per point, no checksums (seqphase migrate converts it)"
    fill = never_written(group)
    unwritten = f"; {fill} chunks never written (fill values)" if fill else ""
    if not damages:
        print(f"sweep {group.name}: {chunks} chunks read, none damaged{unwritten} (layout {group.layout}: {layout})")
        _print_lines(manifest_notes(group))
        return 0
    mask = damaged_mask(group.grid_shape, damages)
    gone = sum(1 for d in damages if d.reason == MISSING)
    print(f"sweep {group.name}: {len(damages)} of {chunks + gone} chunks damaged ({damage_summary(damages)}), "
          f"{int(mask.sum())} points affected{unwritten} (layout {group.layout}: {layout})")
    _print_lines(manifest_notes(group))
    for damage in damages:
        print(f"  damaged {damage.file(group).relative_to(group.store.path)}: {damage.reason}")
    for index in zip(*mask.nonzero()):
        print(f"  point {group.cell_params(tuple(int(i) for i in index))}")
    print(f"  fix: seqphase run {group.name} --store {group.store.path} recomputes them"
          + ("" if group.layout >= 2 else " once migrated (seqphase migrate)"))
    return EXIT_FAILED_POINTS


def cmd_migrate(args):
    from seqphase.results.migrate import migrate_names
    from seqphase.results.migrate import migrate_group
    from seqphase.results.query import sweep_name
    from seqphase.results.store import Store

    store = Store(args.store)
    names = [sweep_name(s) for s in args.sweeps] or store.sweep_names()
    for name in names:
        store.open_sweep(name)  # unknown or corrupted: one line, nothing written
    with store.lock():
        store.unconsolidate(*names)
        for name in names:
            renamed = migrate_names(store, name)
            if renamed:
                print(f"seqphase: {name}: renamed " + ", ".join(f"{old} -> {new}" for old, new in renamed)
                      + " (values unchanged)", file=sys.stderr)
            done = migrate_group(store, name)
            if done is None:
                if not renamed:
                    print(f"seqphase: {name}: already in the current layout", file=sys.stderr)
                continue
            points, before, after, pending = done
            print(f"seqphase: migrated {name}: {points} points, {before} files -> {after} files"
                  + (f"; {pending} points with damaged data set pending (seqphase run recomputes them)"
                     if pending else ""), file=sys.stderr)
        store.consolidate()
    return 0


def cmd_plot(args):
    from seqphase.results.plot import plot_sweep
    from seqphase.results.query import open_results, open_stored

    if not args.output.lower().endswith(".png"):
        raise SeqphaseError("-o", f"{args.output!r} is not a .png file", "write e.g. -o figure.png")
    _check_output_file(args.output)
    ds = open_results(args.sweep, args.store)
    companions = {}
    for role, name in json.loads(ds.attrs.get("plot", "{}")).items():
        # Companion sweeps drawn beside this one: se_sweep (the dense SE curve), and for the models
        # that use them thresholds_sweep, gamp_sweep, ... (core/smi/figures.py). The name comes from the
        # store: it names another group of the store, never a spec file (opening the group checked it).
        if role.endswith("_sweep") and isinstance(name, str):
            try:
                companions[role] = open_stored(name, args.store)
            except SeqphaseError:
                print(f"seqphase: note: {name} is not in the store; run it to draw its curves ({role}) here",
                      file=sys.stderr)
    plot_sweep(ds, args.output, companions, import_model=args.import_model)
    print(f"seqphase: wrote {args.output}", file=sys.stderr)
    return 0


def _print_lines(lines):
    for line in lines:
        print(line)


def cmd_reproduce(args):
    """Check everything (paper, report folder, every sweep, store, cluster options), run each sweep of the
    paper (resuming what is stored) on one cluster, then write the report."""
    from seqphase import api
    from seqphase.results.report import summary as agreement_summary
    from seqphase.sweeps.papers import PAPERS

    if args.list:  # a row per paper, then its sweeps on a line of their own under the second column
        papers = list(PAPERS.values())
        lines = columns([["id", "arXiv", "sweeps", "cost --quick", "cost full size", "title"]] +
                        [[p.id, p.arxiv, str(len(set(p.sweeps))), p.cost_quick, p.cost_full, p.title] for p in papers],
                        right={2})
        indent = " " * lines[0].index("arXiv")
        print(lines[0])
        for line, paper in zip(lines[1:], papers):
            print(line)
            print(f"{indent}sweeps: {', '.join(dict.fromkeys(paper.sweeps))}")
        _note_left_out(PAPERS.unloadable)
        return 0
    if not args.paper:
        raise SeqphaseError("PAPER", "missing", "name a paper id (seqphase reproduce --list)")
    from seqphase.sweeps.papers import get_paper

    get_paper(args.paper)  # an unknown paper is named before the cluster options
    api._check_run_options(args.workers, args.retries)
    index, rows, failed = api.reproduce(args.paper, quick=args.quick, store=args.store, output=args.output,
                                        cluster=args.cluster, workers=args.workers, retries=args.retries,
                                        progress=not args.no_progress, slurm_profile=_slurm_profile(args),
                                        access=_access(args))
    print(f"seqphase: wrote {index} ({agreement_summary(rows)})", file=sys.stderr)
    return EXIT_FAILED_POINTS if failed else 0


COMMANDS = {"run": cmd_run, "submit": cmd_submit, "list": cmd_list, "check": cmd_check, "status": cmd_status, "query": cmd_query, "plot": cmd_plot,
            "retry-failed": cmd_retry_failed, "verify": cmd_verify, "migrate": cmd_migrate,
            "reproduce": cmd_reproduce}


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
