"""`seqphase status`'s width report over the run records a store keeps (results/width.py)."""

from seqphase.results.width import measured, width_lines

FINISHED = {"outcome": "finished", "done": 1, "failed": 0, "works": 10, "work_s": 30.0, "chain_s": 6.0,
            "longest_work_s": 2.0}
KILLED = {"submitted": 1}  # what a run killed before it recorded anything leaves


def test_runs_sum_their_works_and_take_the_longest_chain():
    other = {**FINISHED, "works": 5, "work_s": 12.0, "chain_s": 9.0, "longest_work_s": 3.0}
    assert measured([FINISHED, other], None) == (15, 42.0, 9.0, 3.0, 2, 0, 0)
    lines = width_lines([FINISHED, other])
    assert lines[0].startswith("  width: 42.0 CPU-s of work in 15 tasks (longest task 3.00 s); longest chain 9.00 s")
    assert len(lines) == 2


def test_a_killed_run_is_named_with_the_ledger_work_that_holds_its_kept_works():
    # the killed runs' kept works were reused by the finished one, so only the ledger holds the whole cost
    lines = width_lines([KILLED, KILLED, FINISHED], lambda: [41.5, float("nan")])
    assert lines[0].startswith("  width: 30.0 CPU-s of work in 10 tasks")
    assert lines[-1] == ("  (2 runs stopped before recording measurements: the works they finished are not counted "
                         "above; the done points' runtime_s, which sums every work kept: 41.5 CPU-s)")


def test_a_run_still_going_is_not_called_stopped():
    assert measured([FINISHED, KILLED], None, running=True)[-1] == 0
    assert len(width_lines([FINISHED, KILLED], lambda: [30.0], running=True)) == 2
    assert "1 run stopped before recording measurements: the works it finished" in \
        width_lines([KILLED, FINISHED, KILLED], lambda: [30.0], running=True)[-1]


def test_runs_of_older_versions_are_estimated_from_the_ledger():
    older = {"outcome": "finished", "done": 2, "failed": 0}
    lines = width_lines([older], lambda: [4.0, 6.0])
    assert lines[0].startswith("  width: 10.0 CPU-s of work in 2 tasks (longest task 6.00 s)")
    assert lines[-1] == "  (estimated from the ledger: these runs recorded no task measurements, one task a point)"
