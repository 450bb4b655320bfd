"""How wide a sweep's task graph is, from what its runs measured (the driver records, per run, the works
it computed, their summed runtime, the longest chain of works of one point and the longest work):

    work        = CPU-seconds summed over every task (seed, block, probe, whole point)
    chain       = the longest chain: the slowest point's works that must run one after another (its
                  stages add up; the works of one stage run side by side)
    parallelism = work / chain: past that many workers, more would idle (the wall time on W workers is
                  at least max(chain, work / W), and a list schedule reaches it within a factor 2)

A sweep run in several pieces (resumed, grown, retried) sums the works and takes the longest chain over
its runs. Runs stored by versions that did not record this are counted from the ledger (one task a
point, its runtime). A run killed before it recorded its measurements is not counted: the works it finished
and kept are in its points' ledger runtime_s, which the report then states beside the measured figure.
"""

from __future__ import annotations

import math


def measured(runs, runtimes, running=False):
    """(works, work_s, chain_s, longest_s, runs counted, runs not measured, runs interrupted) over `runs`
    (the group's run records); `runtimes()`: the ledger's runtime_s of the done points, asked for only when
    no run was measured (the estimate for sweeps stored by older versions). Interrupted: a run record with
    no outcome (killed before it wrote one), whose kept works are in no run's figures; with `running`, the
    last record is a run still going, not an interrupted one."""
    works = 0
    work = chain = longest = 0.0
    counted = unmeasured = interrupted = 0
    for number, run in enumerate(runs):
        if "work_s" in run:
            works += run["works"]
            work += run["work_s"]
            chain = max(chain, run["chain_s"])
            longest = max(longest, run["longest_work_s"])
            counted += 1
        elif run.get("done"):
            unmeasured += 1
        elif "outcome" not in run and not (running and number == len(runs) - 1):
            interrupted += 1
    if unmeasured and not counted and runtimes is not None:
        # older runs: one task a point, its ledger runtime
        fallback = finite(runtimes())
        if fallback:
            works, work, chain, longest = len(fallback), sum(fallback), max(fallback), max(fallback)
    return works, work, chain, longest, counted, unmeasured, interrupted


def finite(values):
    return [float(v) for v in values if math.isfinite(float(v))]


def width_lines(runs, runtimes=None, running=False):
    """The lines `seqphase status` prints about the sweep's width (`running`: the last run is still going)."""
    works, work, chain, longest, counted, unmeasured, interrupted = measured(runs, runtimes, running)
    if not works:
        return ["  width: not measured yet (run the sweep, or a reduced grid of it with --set, first)"]
    parallelism = work / chain if chain > 0 else float("inf")
    useful = max(1, math.ceil(parallelism)) if math.isfinite(parallelism) else works
    lines = [f"  width: {work:.1f} CPU-s of work in {works} tasks (longest task {longest:.2f} s); longest chain "
             f"{chain:.2f} s; parallelism {parallelism:.1f}: more than {useful} workers would idle",
             "  wall time at least: " + ", ".join(f"{w} worker{'s' if w > 1 else ''} {max(chain, work / w):.1f} s"
                                             for w in (1, 16, 64, 256))]
    if unmeasured and counted:
        lines.append(f"  ({unmeasured} earlier runs recorded no task measurements and are not counted)")
    elif unmeasured:
        lines.append("  (estimated from the ledger: these runs recorded no task measurements, one task a point)")
    if interrupted and counted:
        # the works such a run finished were kept and reused, so the points' runtime_s holds them
        ledger = f"; the done points' runtime_s, which sums every work kept: {sum(finite(runtimes())):.1f} CPU-s" \
            if runtimes is not None else ""
        lines.append(f"  ({interrupted} run{'s' if interrupted > 1 else ''} stopped before recording measurements: "
                     f"the works {'they' if interrupted > 1 else 'it'} finished are not counted above{ledger})")
    return lines
