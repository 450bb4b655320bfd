"""The user pages state what holds now, and how it was measured: no marks of how the text came to be.

The user pages are README.md and every page of the manual, docs/**/*.md, except docs/changelog.md, which only
includes CHANGELOG.md (a changelog records changes by design). A page fails on any of these marks:

- a load average or a load figure ("load average", "at load 3", "at a load of", "(load 4-6)"): a measurement
  names the command that reruns it, not the state of a shared machine on one day;
- "another 2-core machine", "the idle machine" and the like: a particular machine of the project, rather than
  "an idle 2-core machine";
- an issue or pull-request number ("issue 12", "(issue", "#12");
- a path of a working session: "/tmp/w" followed by a letter or digit (the temporary folders of a session, as
  "/tmp/w42a-slurm"), or "/work/". A generic temporary path in an example command ("/tmp/readme.zarr") is
  allowed: the rule names the session prefixes, not "/tmp";
- history phrases in prose: "no longer", "now `...`" (a name that replaced another), "was X, changed",
  "not rerun yet", "until recently";
- the residue of an HTML comment: "-->" outside code and without an opening "<!--" before it (it renders
  as "–>").

The phrase and comment rules read the prose only: fenced code blocks and inline code are left out, so that a
command's output or an arrow in a diagram is not a mark. The path rules read everything, code included.

`SEQPHASE_DOCS_ROOT=/path/to/a/checkout python -m pytest -q -n 0 tests/test_docs_history.py` checks another
checkout's pages (an older revision must fail).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

ROOT = Path(os.environ.get("SEQPHASE_DOCS_ROOT") or Path(__file__).resolve().parents[1])

EVERYWHERE = {
    "session path": re.compile(r"/tmp/w[A-Za-z0-9]|/work/"),
}

PROSE = {
    "load figure": re.compile(r"\bload average|\bat (?:a )?load\b|\ba load of \d|\(load \d", re.IGNORECASE),
    "a particular machine": re.compile(r"\banother (?:idle )?(?:\d+-core )?machine\b|\bthe idle (?:\d+-core )?machine\b",
                                       re.IGNORECASE),
    "issue number": re.compile(r"\bissues? #?\d+|\(issue\b|(?<![\w&/#.-])#\d+\b", re.IGNORECASE),
    "history phrase": re.compile(r"\bno longer\b|\bnow `|\bwas [^.;:]{1,60}, changed|\bnot rerun yet\b|\bnot yet rerun\b|"
                                 r"\buntil recently\b", re.IGNORECASE),
}

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+)(?:(?!\1).)+?\1")


def user_pages(root=ROOT):
    pages = [root / "README.md"] if (root / "README.md").exists() else []
    for page in sorted((root / "docs").rglob("*.md")):
        relative = page.relative_to(root / "docs")
        if relative.parts[0].startswith("_"):  # _build, _static: not pages
            continue
        if relative == Path("changelog.md") and "{include} ../CHANGELOG.md" in page.read_text(encoding="utf-8"):
            continue
        pages.append(page)
    return pages


def prose_lines(text):
    """(line number, line) outside fenced code blocks, with inline code removed. A directive fence that holds
    Markdown ({toctree}, {note}, ...) is prose; a code fence ({code-cell}, ```python, ...) is not."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if fence is None and match:
            info = line[match.end():].strip()
            if info.startswith("{") and not info.startswith(("{code-cell}", "{code-block}", "{literalinclude}")):
                continue  # a directive whose body is Markdown: read it as prose
            fence = match.group(2)
            continue
        if fence is not None:
            if line.strip().startswith(fence[0] * len(fence)) and not line.strip().strip(fence[0]):
                fence = None
            continue
        yield number, INLINE_CODE.sub(" ", line)


def history_marks(text):
    """Every mark of history in a page's text, as (line number, rule, the text matched)."""
    marks = []
    for number, line in enumerate(text.splitlines(), 1):
        for rule, pattern in EVERYWHERE.items():
            marks += [(number, rule, m.group(0)) for m in pattern.finditer(line)]
    comment_open = False
    for number, line in prose_lines(text):
        for rule, pattern in PROSE.items():
            marks += [(number, rule, m.group(0)) for m in pattern.finditer(line)]
        for token in re.finditer(r"<!--|-->", line):
            if token.group(0) == "<!--":
                comment_open = True
            elif comment_open:
                comment_open = False
            else:
                marks.append((number, "comment residue", "-->"))
    return sorted(marks)


@pytest.mark.parametrize("page", user_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_user_page_has_no_marks_of_history(page):
    marks = history_marks(page.read_text(encoding="utf-8"))
    assert not marks, f"{page.relative_to(ROOT)}: " + "; ".join(f"line {n}: {rule} {text!r}" for n, rule, text in marks)


@pytest.mark.parametrize("text", [
    "version 7 and 8 CPU-s were measured at a load average of 3–12 on the 2-core machine",
    "202 s (CPU 199 s) at load 3.1, beside a 2-worker sweep",
    "On another idle 2-core machine the same run took 39.7 s",
    "on the idle 2-core machine, then `seqphase status`",
    "see issue 12 for the details",
    "fixed in #42.",
    "driver log /tmp/w42a-slurm/slurm-logs/seqphase-driver-3.out",
    "Channel plug-in points carry the derivation version (now `derived-v3`) -->",
    "`plot` no longer imports the model module named by a store.",
    "The default was 4, changed after the benchmark.",
    "c = 1e-4 not rerun yet",
])
def test_marks_are_found(text):
    assert history_marks(text)


@pytest.mark.parametrize("text", [
    "`seqphase run glm-perceptron-se --store /tmp/readme.zarr`",
    "```text\nspec --plan--> points\n```",
    "<!-- a comment the page does not render -->",
    "measured on an idle 2-core machine (`python benchmarks/parallelism.py speedup glm-perceptron-se`)",
    "[the first step](04-run-on-slurm.md#1-a-cluster-here-the-development-one)",
    "`seqphase status` prints the work now",
    "the overlap grows from now on",
])
def test_legitimate_text_passes(text):
    assert not history_marks(text), history_marks(text)
