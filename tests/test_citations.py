"""Citations, not paths: every shipped spec cites its paper (arXiv id) and a docs/ page of this repository,
and no tracked file points outside the repository (no path into the developers' folders outside it)."""

import re
import subprocess
from pathlib import Path

import pytest

from seqphase.sweeps.spec import load_sweep, shipped_specs

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = "shared" + "/"  # written in two pieces so that this file does not match itself


@pytest.mark.parametrize("name", sorted(shipped_specs()))
def test_spec_reference_cites_paper_and_docs(name):
    reference = load_sweep(name).reference
    assert re.search(r"arXiv:\d{4}\.\d{4,5}", reference), (name, reference)
    pages = re.findall(r"docs/(?:[a-z0-9-]+/)?[a-z0-9-]+\.md", reference)
    assert pages, (name, reference)
    for page in pages:
        assert (ROOT / page).is_file(), (name, page)


def _tracked_files():
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, timeout=30)
    except OSError:
        out = None
    if out is None or out.returncode != 0:
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [ROOT / name for name in out.stdout.decode().split("\0") if name]


def test_no_tracked_file_points_outside_the_repository():
    offenders = []
    for path in _tracked_files():
        if not path.is_file() or path.suffix in {".png", ".zarr"}:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE in line:
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not offenders, "\n".join(offenders)
