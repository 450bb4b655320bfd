"""Reference pages generated from the code itself, so they cannot drift from it.

Directives (used by docs/reference/*.md):

- ``seqphase-cli``: every subcommand of the `seqphase` command and every option, read from the argparse
  parser that `seqphase.cli.build_parser` builds (the parser the command runs);
- ``seqphase-models``: every registered model (`seqphase.core.models.registered_models`, the installed families'
  models): its parameters with kind, valid range, default and meaning, and each method with its settings and
  algorithm version;
- ``seqphase-sweeps``: the shipped sweeps (`seqphase.api.list_sweeps`);
- ``seqphase-sweep-costs``: what each shipped sweep costs (`seqphase.sweeps.costs`, sweeps/costs.toml);
- ``seqphase-papers``: the papers `seqphase reproduce` covers (`seqphase.sweeps.papers.PAPERS`);
- ``seqphase-paper-costs``: what each paper's reproduction costs, `--quick` and full size (`seqphase.sweeps.costs`);
- ``seqphase-citations``: the paper behind every shipped sweep, by arXiv id (the papers of `PAPERS`, matched to a
  sweep that no paper lists by the sweep's model);
- ``seqphase-method-versions``: every method's current algorithm version and the plug-in derivation versions
  (`seqphase.core.plugins`), the numbers that enter a point's identity.

Each directive writes MyST Markdown (the language of the pages that use it) and parses it in place,
headings included, so the generated sections get the same anchors, table of contents and search index as
hand-written ones.
"""

from __future__ import annotations

import argparse
import re

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

HEADING_LEVEL = 2  # the generated sections sit under the page's own title (#)


def _literal(text):
    """Inline code that survives any characters a help text or default may hold."""
    text = str(text).replace("`", "'")
    return f"`` {text} ``" if text.strip() else ""


# an option named in help text (`--cluster`, `--list`): set as code, or the typography would join "--" into a dash
_OPTION = re.compile(r"(?<![\w-])(--[A-Za-z][\w-]*)")


def _escape(text):
    for char in "\\*_<>[]|":
        text = text.replace(char, "\\" + char)
    return text


def _prose(text):
    """Help text as Markdown: its `code` spans kept, options set as code, no emphasis, links or HTML from
    other characters."""
    parts = str(text or "").split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code spans at all
        parts = [str(text).replace("`", "'")]
    for i in range(0, len(parts), 2):  # the even parts lie outside code spans
        pieces = _OPTION.split(parts[i])  # odd pieces: the options
        parts[i] = "".join(f"`{piece}`" if j % 2 else _escape(piece) for j, piece in enumerate(pieces))
    return "`".join(parts)


def _cell(text):
    """A table cell on one line (list-table cells are block content)."""
    return " ".join(str(text).split()) or " "


def _heading(text, level):
    return ["#" * (HEADING_LEVEL + level) + " " + text, ""]


def _list_table(header, rows, widths=None):
    lines = ["```{list-table}", ":header-rows: 1"]
    if widths:
        lines.append(":widths: " + " ".join(str(w) for w in widths))
    lines.append("")
    for row in [header, *rows]:
        for i, cell in enumerate(row):
            lines.append(("* - " if i == 0 else "  - ") + _cell(cell))
    lines += ["```", ""]
    return lines


class _GeneratedDirective(SphinxDirective):
    has_content = False

    def lines(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def run(self):
        source = StringList()
        for number, line in enumerate(self.lines()):
            source.append(line, f"<{self.name}>", number)
        holder = nodes.container()  # a scratch parent: only its parsed children go into the page
        nested_parse_with_titles(self.state, source, holder)
        return holder.children


# -- the command line -------------------------------------------------------------------------------


def _option_row(action):
    if action.option_strings:
        names = ", ".join(action.option_strings)
        if action.nargs == 0:
            form = names
        else:
            metavar = action.metavar or (("{" + ",".join(map(str, action.choices)) + "}") if action.choices
                                         else action.dest.upper())
            form = f"{names} {metavar}"
    else:
        form = action.metavar or action.dest.upper()
        if action.nargs in ("*", "?"):
            form = f"[{form}{' ...' if action.nargs == '*' else ''}]"
    default = ""
    if action.option_strings and action.nargs != 0 and action.default not in (None, [], argparse.SUPPRESS):
        default = _literal(action.default)
    if action.choices and action.option_strings:
        default = (default + "; " if default else "") + "one of " + ", ".join(_literal(c) for c in action.choices)
    needed = "required" if (action.required or not action.option_strings and action.nargs not in ("*", "?")) \
        else ""
    return [_literal(form), _prose(action.help), "; ".join(x for x in (needed, default) if x)]


class CliDirective(_GeneratedDirective):
    """Every subcommand of `seqphase` with its usage line and a table of its arguments."""

    def lines(self):
        from seqphase.cli import build_parser

        parser = build_parser()
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        helps = {choice.dest: choice.help for choice in sub._choices_actions}
        out = []
        for name, command in sub.choices.items():
            out += _heading(f"seqphase {name}", 0)
            out += [_prose(helps.get(name)) + ".", ""]
            usage = " ".join(command.format_usage().replace("usage:", "").split())
            out += ["```text", usage, "```", ""]
            rows = [_option_row(a) for a in command._actions if not isinstance(a, argparse._HelpAction)]
            if rows:
                out += _list_table(["argument", "meaning", "required / default"], rows, widths=[30, 55, 15])
            else:
                out += ["No arguments.", ""]
        return out


# -- the models -------------------------------------------------------------------------------------


def _default_text(param):
    from seqphase.core.models import REQUIRED

    if param.default is REQUIRED:
        return "required"
    return _literal(repr(param.default) if isinstance(param.default, str) else param.default)


def _param_rows(params):
    return [[_literal(p.name), p.kind, _prose(p.range_text()), _default_text(p),
             _prose(p.doc) + (f" (or a plug-in `module:Class`, a `seqphase."
                              f"{'Likelihood' if p.plugin == 'channel' else 'Prior'}`)" if p.plugin else "")]
            for p in params.values()]


class ModelsDirective(_GeneratedDirective):
    """Every registered model: its parameters, its methods and their settings."""

    def lines(self):
        from seqphase.core.models import get_model, model_names

        out = []
        header = ["name", "kind", "valid values", "default", "meaning"]
        for name in model_names():
            model = get_model(name)
            out += _heading(f"Model {name}", 0)
            out += [_prose(model.description.rstrip(".")) + "." if model.description else "", "",
                    f"Named `model = \"{name}\"` in a spec. Parameters (each one a dim of the stored dataset):", ""]
            out += _list_table(header, _param_rows(model.params), widths=[14, 8, 30, 12, 36])
            for method_name, method in model.methods.items():
                out += _heading(f"{name} / {method_name}", 1)
                excluded = f" It does not take the parameters {', '.join(_literal(p) for p in method.excludes)}." \
                    if method.excludes else ""
                axes = f" Grid axes of its own: {', '.join(_literal(a) for a in method.axes)}." if method.axes else ""
                out += [f"{_prose((method.doc or '').rstrip('.'))}. Algorithm version {method.version}.{excluded}{axes}",
                        ""]
                if method.settings:
                    out += _list_table(header, _param_rows(method.settings), widths=[14, 8, 30, 12, 36])
                else:
                    out += ["No settings.", ""]
        return out


class SweepsDirective(_GeneratedDirective):
    """The shipped sweeps, as `seqphase list` prints them."""

    def lines(self):
        from seqphase.api import list_sweeps

        rows = [[_literal(s["name"]), f"{s['model']} / {s['method']}", str(s["points"]), _cpu_text(s["cost"]),
                 _prose(s["title"])] for s in list_sweeps()]
        return _list_table(["name", "model / method", "points", "CPU-s", "title"], rows, widths=[24, 18, 7, 9, 42])


def _cpu_text(cost):
    """A sweep's CPU-s as `seqphase list` prints it ("~" where estimated from a subset of its points)."""
    from seqphase.cli import _cpu_cell

    return _cpu_cell(cost).replace("~", "\\~")


class SweepCostsDirective(_GeneratedDirective):
    """What each shipped sweep costs, from `seqphase.sweeps.costs` (sweeps/costs.toml): points, CPU-s, wall on
    2 workers where run whole, the longest chain, how it was measured and the command."""

    def lines(self):
        from seqphase.api import list_sweeps

        rows = []
        for s in list_sweeps():
            cost = s["cost"]
            if cost is None:
                rows.append([_literal(s["name"]), str(s["points"]), "not measured", " ", " ", " ", " "])
                continue
            wall = f"{cost.wall_s:,.0f}" if cost.wall_s is not None else " "
            how = cost.how + (f" ({_prose(cost.source)})" if cost.source else "")
            rows.append([_literal(s["name"]), str(cost.points), f"{cost.cpu_s:,.0f}", wall,
                         f"{cost.chain_s:,.1f}" if cost.chain_s is not None else "not recorded",
                         how, _literal(cost.command)])
        return _list_table(["sweep", "points", "CPU-s", "wall s on 2 workers", "longest chain s",
                            "how measured", "command of the points measured"], rows,
                           widths=[18, 6, 8, 8, 8, 17, 35])


class PapersDirective(_GeneratedDirective):
    """The papers of `seqphase reproduce`, with their sweeps and measured costs."""

    def lines(self):
        from seqphase.sweeps.papers import PAPERS

        rows = [[_literal(p.id), f"{_prose(p.authors)}, {_prose(p.title)}, arXiv:{p.arxiv}",
                 ", ".join(_literal(s) for s in dict.fromkeys(p.sweeps)), _prose(p.cost_quick), _prose(p.cost_full)]
                for p in PAPERS.values()]
        return _list_table(["id", "paper", "sweeps", "`--quick` cost", "full-size cost"], rows,
                           widths=[8, 32, 30, 15, 15])


class PaperCostsDirective(_GeneratedDirective):
    """What each paper's reproduction costs: `--quick` measured whole, full size summed over its sweeps."""

    def lines(self):
        from seqphase.sweeps.costs import sweep_cost
        from seqphase.sweeps.papers import PAPERS

        rows = []
        for p in PAPERS.values():
            quick, full = p.quick_cost, p.full_cost
            runs = [sweep_cost(r.stored_name(False)) for r in p.runs]
            whole = sum(1 for c in runs if c is not None and c.whole)
            rows.append([_literal(p.id), f"{quick.wall_s:,.0f}" if quick else "not measured",
                         f"{quick.cpu_s:,.0f}" if quick else " ", f"{full.cpu_s:,.0f}" if full else "not measured",
                         (f"{'~' if full.estimated else ''}{full.wall_s:,.0f}").replace("~", "\\~") if full else " ",
                         f"{full.chain_s:,.0f}" if full else " ", f"{whole} of {len(runs)}",
                         _prose(full.text()) if full else " "])
        return _list_table(["paper", "`--quick` wall s", "`--quick` CPU-s", "full CPU-s", "full wall s on 2 workers",
                            "full longest chain s", "runs measured whole", "full size, as `reproduce --list` says"],
                           rows, widths=[8, 8, 8, 9, 9, 9, 9, 40])


def _sweep_papers():
    """(sweep, papers) for every shipped sweep: the papers that list it, or else those of its model."""
    from seqphase.api import list_sweeps
    from seqphase.sweeps.papers import PAPERS

    sweeps = list_sweeps()
    model_of = {s["name"]: s["model"] for s in sweeps}
    by_sweep, by_model = {}, {}
    for paper in PAPERS.values():
        for name in dict.fromkeys(paper.sweeps):
            by_sweep.setdefault(name, []).append(paper)
            if name in model_of:
                by_model.setdefault(model_of[name], []).append(paper)
    out = []
    for s in sweeps:
        papers = by_sweep.get(s["name"]) or list(dict.fromkeys(by_model.get(s["model"], [])))
        out.append((s, papers))
    return out


class CitationsDirective(_GeneratedDirective):
    """The papers behind the shipped sweeps, and the paper of each sweep, by arXiv id."""

    def lines(self):
        from seqphase.sweeps.papers import PAPERS

        out = _heading("The papers", 1)
        rows = [[f"arXiv:{p.arxiv}", _prose(p.authors), _prose(p.title), _prose(p.venue), _literal(p.id)]
                for p in PAPERS.values()]
        out += _list_table(["arXiv", "authors", "title", "venue", "`seqphase reproduce`"], rows,
                           widths=[14, 22, 40, 12, 12])
        out += _heading("The paper behind each sweep", 1)
        rows = [[_literal(s["name"]), f"{s['model']} / {s['method']}",
                 ", ".join(f"arXiv:{p.arxiv}" for p in papers) or "none",
                 "; ".join(_prose(p.title) for p in papers) or " "]
                for s, papers in _sweep_papers()]
        out += _list_table(["sweep", "model / method", "cite", "paper"], rows, widths=[28, 18, 16, 38])
        return out


class MethodVersionsDirective(_GeneratedDirective):
    """The current algorithm version of every method, and of the plug-in derivations."""

    def lines(self):
        from seqphase.core.models import get_model, model_names
        from seqphase.core.plugins import DERIVED_CHANNEL_VERSION, DERIVED_VECTOR_CHANNEL_VERSION

        rows = [[_literal(name), _literal(method_name), str(method.version)]
                for name in model_names() for method_name, method in get_model(name).methods.items()]
        out = _list_table(["model", "method", "version"], rows, widths=[30, 30, 40])
        out += ["The derivation of a channel plug-in's quantities has a version of its own, carried in the point's "
                "algorithm version as `derived-vN`:", ""]
        out += _list_table(["plug-in", "derivation version"],
                           [["p = 1 channel (`glm`)", f"`derived-v{DERIVED_CHANNEL_VERSION}`"],
                            ["p = 2 channel (`multiindex`)", f"`derived-v{DERIVED_VECTOR_CHANNEL_VERSION}`"]],
                           widths=[50, 50])
        return out


def setup(app):
    app.add_directive("seqphase-cli", CliDirective)
    app.add_directive("seqphase-models", ModelsDirective)
    app.add_directive("seqphase-sweeps", SweepsDirective)
    app.add_directive("seqphase-sweep-costs", SweepCostsDirective)
    app.add_directive("seqphase-papers", PapersDirective)
    app.add_directive("seqphase-paper-costs", PaperCostsDirective)
    app.add_directive("seqphase-citations", CitationsDirective)
    app.add_directive("seqphase-method-versions", MethodVersionsDirective)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
