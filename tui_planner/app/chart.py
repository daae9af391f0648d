"""A scatter chart of training days against cost, drawn with text so it works in any terminal.

Both axes are logarithmic (costs run from a few thousand dollars to a quarter million, days from a few
to hundreds). Pareto-optimal options are diamonds, the rest dots; the budget is a vertical line, the
deadline a horizontal one. The selected point, the verdict's pick and the Pareto points are labelled where
a label has room (in that order, never over another point or label). `render` is a plain function of its
inputs, so tests check the picture; `legend` names only what the picture draws.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rich.text import Text

Y_LABEL_W = 6


@dataclass(frozen=True)
class Point:
    x: float  # USD
    y: float  # days
    label: str
    pareto: bool
    fits: bool  # within budget and deadline
    pick: bool = False  # the option the verdict buys


def legend(points: list[Point], budget: float | None = None, deadline: float | None = None) -> list[tuple[str, str, str]]:
    """(glyph, style, words) for each kind of mark `render` draws for these inputs, and nothing else."""
    out = []
    if any(p.pareto for p in points):
        out.append(("◆", "bold green", "Pareto"))
    if any(p.fits and not p.pareto for p in points):
        out.append(("●", "", "fits"))
    if any(not p.fits and not p.pareto for p in points):
        out.append(("○", "dim", "over budget/late"))
    if any(p.pick for p in points):
        out.append(("▸", "bold", "pick"))
    if points and budget:
        out.append(("│", "yellow", "budget"))
    if points and deadline:
        out.append(("─", "yellow", "deadline"))
    return out


def pareto(xy: list[tuple[float, float]]) -> list[bool]:
    """For each (cost, days), whether nothing else is both no dearer and no slower, and better in one: the
    frontier on whichever cost the chart plots (hardware, or per experiment)."""
    return [not any(x2 <= x and y2 <= y and (x2 < x or y2 < y) for x2, y2 in xy) for x, y in xy]


def _nice_ticks(lo: float, hi: float) -> list[float]:
    ticks = []
    for e in range(math.floor(math.log10(lo)) - 1, math.ceil(math.log10(hi)) + 1):
        for m in (1, 2, 5):
            v = m * 10**e
            if lo <= v <= hi:
                ticks.append(v)
    if len(ticks) > 9:
        ticks = [t for t in ticks if str(t).lstrip("0.").startswith("1")] or ticks
    return ticks


def _usd(v: float) -> str:
    if v >= 1e6:
        return f"${v / 1e6:g}M"
    return f"${v / 1e3:g}k" if v >= 1e3 else f"${v:g}"


def _days(v: float) -> str:
    return f"{v:g}"


def render(points: list[Point], width: int, height: int, budget: float | None = None,
           deadline: float | None = None, selected: int | None = None, x_title: str = "hardware cost") -> Text:
    """The chart as `height` lines of `width` cells (the last two are the x axis)."""
    plot_w, plot_h = max(10, width - Y_LABEL_W - 1), max(4, height - 2)
    if not points:
        return Text("no results to plot for this model and these filters", style="dim")
    xs = [p.x for p in points] + ([budget] if budget else [])
    ys = [p.y for p in points] + ([deadline] if deadline else [])
    x_lo, x_hi = min(xs) / 1.3, max(xs) * 1.3
    y_lo, y_hi = min(ys) / 1.3, max(ys) * 1.3

    def col(x: float) -> int:
        return round((math.log(x) - math.log(x_lo)) / (math.log(x_hi) - math.log(x_lo)) * (plot_w - 1))

    def row(y: float) -> int:  # row 0 is the top: many days
        return plot_h - 1 - round((math.log(y) - math.log(y_lo)) / (math.log(y_hi) - math.log(y_lo)) * (plot_h - 1))

    cells: list[list[tuple[str, str]]] = [[(" ", "") for _ in range(plot_w)] for _ in range(plot_h)]
    if deadline:
        r = row(deadline)
        for c in range(plot_w):
            cells[r][c] = ("─", "yellow")
    if budget:
        c = col(budget)
        for r in range(plot_h):
            cells[r][c] = ("┼" if cells[r][c][0] == "─" else "│", "yellow")
    # Draw the least important first, so a Pareto point or the selected one is never hidden.
    order = sorted(range(len(points)), key=lambda i: (i == selected, points[i].pareto))
    for i in order:
        p = points[i]
        glyph = "◆" if p.pareto else ("●" if p.fits else "○")
        style = ("bold green" if p.fits else "bold magenta") if p.pareto else ("" if p.fits else "dim")
        if i == selected:
            style += " reverse"
        cells[row(p.y)][col(p.x)] = (glyph, style.strip())

    # Labels: the selected point's, the pick's, then the Pareto points' (cheapest first), each to the right
    # of its point, else to its left, only over empty cells or lines, and never touching another label; the
    # selected point's and the pick's on the row above or below where their own has no room.
    taken = [[glyph not in (" ", "─", "│", "┼") for glyph, _ in line] for line in cells]
    wanted = ([selected] if selected is not None and 0 <= selected < len(points) else []) + \
        [i for i, p in enumerate(points) if p.pick] + sorted((i for i, p in enumerate(points) if p.pareto),
                                                            key=lambda i: points[i].x)
    done: set[int] = set()
    for i in wanted:
        if i in done:
            continue
        done.add(i)
        p = points[i]
        text = ("▸" if p.pick else "") + p.label
        r0, c = row(p.y), col(p.x)
        rows = [r0] + ([x for x in (r0 - 1, r0 + 1) if 0 <= x < plot_h] if p.pick or i == selected else [])
        places = [(r, start) for r in rows for start in ((c + 2, c - 1 - len(text)) if r == r0 else
                                                         (c + 1, c - len(text)))]
        for r, start in places:
            span = range(start - 1, start + len(text) + 1)
            if start < 0 or start + len(text) > plot_w or any(0 <= x < plot_w and taken[r][x] for x in span):
                continue
            style = "bold reverse" if i == selected else "bold" if p.pick else "green" if p.pareto else ""
            for k, ch in enumerate(text):
                cells[r][start + k] = (ch, style)
                taken[r][start + k] = True
            break

    y_ticks = {row(v): _days(v) for v in _nice_ticks(y_lo, y_hi)}
    if deadline:  # the deadline's line reads as its own value, never as a tick it shares a row with
        y_ticks[row(deadline)] = _days(deadline)
    out = Text(no_wrap=True, overflow="crop")
    for r in range(plot_h):
        out.append(f"{y_ticks.get(r, ''):>{Y_LABEL_W - 1}} ", style="dim")
        out.append("┤" if r in y_ticks else "│", style="dim")
        for glyph, style in cells[r]:
            out.append(glyph, style=style)
        out.append("\n")
    axis = ["─"] * plot_w
    labels = [" "] * (plot_w + Y_LABEL_W + 1)
    for v in _nice_ticks(x_lo, x_hi):
        c = col(v)
        axis[c] = "┬"
        text = _usd(v)
        start = min(max(0, Y_LABEL_W + 1 + c - len(text) // 2), len(labels) - len(text))
        if all(ch == " " for ch in labels[max(0, start - 1):start + len(text) + 1]):
            labels[start:start + len(text)] = list(text)
    out.append(" days ".rjust(Y_LABEL_W) + "└", style="dim")
    out.append("".join(axis) + "\n", style="dim")
    out.append("".join(labels), style="dim")
    return out
