"""The report of `seqphase reproduce`: figures, the agreement table and provenance, as one static page.

`agreement(paper, results)` computes the rows of the agreement table from the stored results (`results`:
spec or stored name -> Dataset of the run, masked to done points): the checks of the paper's family
(core/<family>/checks.py, built on `seqphase.core.agreement`) compare them with the family's published data
(core/<family>/reference/) or the numbers the paper quotes. The tolerance of a row comes from how the two
numbers were made: the Monte-Carlo standard error of a seed mean, the accuracy of the published file (its
authors' stopping rule or quadrature), or the number of digits the paper quotes. A row whose deviation exceeds
its tolerance is `differs (explained)` when a docs/ section explains it (the page shows that section, quoted
here), else `differs`. This module holds no physics.

`write_report(...)` writes DIR/index.html (no script, no network: images by relative path, styles inline),
DIR/agreement.csv, one PNG per sweep under DIR/figures/, and DIR/.seqphase-report (the marker that lets a
later reproduce overwrite the folder).
"""

from __future__ import annotations

import csv
import html
import re
from importlib import resources

from seqphase.core.agreement import AGREES, COLUMNS, DIFFERS, EXPLAINED

MARKER = ".seqphase-report"


def agreement(paper, results):
    """The rows of the agreement table of `paper` from `results` ({spec or run name: Dataset}): the checks of
    the family that lists the paper, given its published data."""
    from seqphase.sweeps.papers import agreement_rows

    return agreement_rows(paper, results)


# -- docs sections -------------------------------------------------------------------------------------
def docs_section(page, title, limit=4000):
    """The text of a section of a docs page (shipped as package data), up to `limit` characters."""
    try:
        text = resources.files("seqphase").joinpath(page).read_text()
    except (FileNotFoundError, OSError):
        return ""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.lstrip("#").strip() == title:
            level = len(line) - len(line.lstrip("#"))
            body = []
            for nxt in lines[i + 1:]:
                if nxt.startswith("#") and len(nxt) - len(nxt.lstrip("#")) <= level:
                    break
                body.append(nxt)
            out = "\n".join(body).strip()
            return out if len(out) <= limit else out[:limit].rsplit("\n", 1)[0] + "\n[...]"
    return ""


def anchor(page, title):
    return "explain-" + re.sub(r"[^a-z0-9]+", "-", f"{page} {title}".lower()).strip("-")


# -- the page ------------------------------------------------------------------------------------------
def write_csv(rows, path):
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow(row.record())


def summary(rows):
    counts = {v: sum(r.verdict == v for r in rows) for v in (AGREES, EXPLAINED, DIFFERS)}
    return f"{len(rows)} rows: {counts[AGREES]} agree, {counts[EXPLAINED]} differ (explained), {counts[DIFFERS]} differ"


STYLE = """body{font-family:sans-serif;max-width:1100px;margin:1em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;font-size:13px;margin:0.5em 0}td,th{border:1px solid #bbb;padding:2px 6px;
text-align:left}th{background:#eee}td.num{text-align:right;font-family:monospace}
.agrees{background:#e6f4e6}.differs{background:#f8dddd}.explained{background:#fff3cd}
img{max-width:100%;border:1px solid #ccc}pre{white-space:pre-wrap;background:#f6f6f6;padding:0.5em;font-size:12px}
figure{margin:1em 0}figcaption{font-size:13px;color:#444}"""


def write_html(path, paper, quick, figures, rows, provenance, runs):
    """figures: [(run, png relative path or None, reason)]; runs: [(run, stored name, timing dict)]."""
    e = html.escape
    size = "quick (reduced grids, listed below)" if quick else "full"
    out = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>seqphase reproduce "
           f"{e(paper.id)}</title><style>{STYLE}</style></head><body>",
           f"<h1>{e(paper.title)}</h1>",
           f"<p>{e(paper.cite())}. Reproduced by seqphase at {e(size)} size; discussed in "
           f"<code>{e(paper.docs)}</code> of the repository.</p>",
           f"<p><strong>Agreement:</strong> {e(summary(rows))}.</p>",
           "<h2 id=\"figures\">Figures</h2>"]
    for run, png, note in figures:
        out.append("<figure>")
        if png:
            out.append(f"<img src=\"{e(png)}\" alt=\"{e(run.stored_name(quick))}\">")
        out.append(f"<figcaption><strong>{e(run.stored_name(quick))}</strong>: reproduces {e(run.figure)} of "
                   f"arXiv:{e(paper.arxiv)}{'; ' + e(note) if note else ''}</figcaption></figure>")
    out.append("<h2 id=\"agreement\">Agreement table</h2><p>Also in <a href=\"agreement.csv\">agreement.csv</a>. "
               "Deviation = ours − published.</p><table id=\"agreement-table\"><thead><tr>" +
               "".join(f"<th>{c}</th>" for c in ("figure", "curve", "quantity", "ours", "published", "deviation",
                                                 "tolerance", "tolerance from", "verdict")) + "</tr></thead><tbody>")
    explained = {}
    for row in rows:
        rec = row.record()
        cls = {AGREES: "agrees", EXPLAINED: "explained", DIFFERS: "differs"}[row.verdict]
        verdict = e(row.verdict)
        if row.verdict == EXPLAINED:
            target = anchor(*row.explanation)
            explained[target] = row.explanation
            verdict = f"<a href=\"#{target}\">{verdict}</a>"
        out.append(f"<tr class=\"{cls}\"><td>{e(rec['figure'])}</td><td>{e(rec['curve'])}</td>"
                   f"<td>{e(rec['quantity'])}</td>" + "".join(f"<td class=\"num\">{rec[k]}</td>" for k in
                                                              ("ours", "published", "deviation", "tolerance")) +
                   f"<td>{e(row.tolerance_from)}</td><td>{verdict}</td></tr>")
    out.append("</tbody></table>")
    if explained:
        out.append("<h2 id=\"explanations\">Explained differences</h2>")
        for target, (page, title) in explained.items():
            out.append(f"<h3 id=\"{target}\">{e(page)}, section “{e(title)}”</h3><pre>{e(docs_section(page, title))}"
                       "</pre>")
    out.append("<h2 id=\"provenance\">Provenance</h2><table><tbody>" +
               "".join(f"<tr><th>{e(k)}</th><td>{e(str(v))}</td></tr>" for k, v in provenance.items()) +
               "</tbody></table>")
    out.append("<table><thead><tr><th>sweep</th><th>stored as</th><th>size</th><th>points</th><th>computed now</th>"
               "<th>wall s</th><th>CPU s (sum of point times)</th><th>spec hash</th></tr></thead><tbody>")
    for run, name, timing in runs:
        out.append(f"<tr><td>{e(run.spec)}</td><td>{e(name)}</td><td>{e(run.why_quick if quick else 'full')}</td>"
                   f"<td class=\"num\">{timing['points']}</td><td class=\"num\">{timing['computed']}</td>"
                   f"<td class=\"num\">{timing['wall_s']:.1f}</td><td class=\"num\">{timing['cpu_s']:.1f}</td>"
                   f"<td><code>{e(timing['spec_hash'][:16])}</code></td></tr>")
    out.append("</tbody></table></body></html>\n")
    path.write_text("\n".join(out))
