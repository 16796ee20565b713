"""Usage charts as inline SVG, drawn on the server: the page needs no script to show them, and
its Content Security Policy allows no inline style, so a chart is elements and presentation
attributes only.

A chart holds numbers, times and the app's name it is captioned with (escaped): never a path or
anything an app sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from markupsafe import Markup, escape

WIDTH, HEIGHT = 360, 90
TOP, BOTTOM = 16, 16  # room for the caption and the time axis


@dataclass(frozen=True)
class Chart:
    title: str  # e.g. "Requests"
    unit: str  # after the largest value, e.g. "ms"
    colour: str
    values: Sequence[float | None]  # oldest first; None: no value (no requests)
    starts: Sequence[float]  # each value's period start, seconds since the epoch
    period: str  # "minute" or "hour", for the hover titles


def bar_chart(chart: Chart) -> Markup:
    """Bars, one per period, scaled to the largest; a title on each bar tells its value."""
    count = len(chart.values) or 1
    largest = max((value or 0.0 for value in chart.values), default=0.0) or 1.0
    slot = WIDTH / count
    plot = HEIGHT - TOP - BOTTOM
    shown = [value for value in chart.values if value is not None]
    total = sum(shown)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" role="img" width="{WIDTH}" '
        f'height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" data-total="{total:g}" '
        f'aria-label="{escape(chart.title)}">',
        f'<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#fff" stroke="#d9dde5"/>',
        f'<text x="4" y="12" font-size="11" fill="#5b6475">{escape(chart.title)} · max '
        f"{_number(max(shown, default=0.0))}{escape(chart.unit)}</text>",
    ]
    for index, (value, start) in enumerate(zip(chart.values, chart.starts, strict=True)):
        if not value:
            continue
        height = max(1.0, plot * value / largest)
        x = index * slot
        when = datetime.fromtimestamp(start, UTC).strftime("%H:%M")
        parts.append(
            f'<rect class="bar" x="{x:.1f}" y="{TOP + plot - height:.1f}" '
            f'width="{max(1.0, slot - 1):.1f}" height="{height:.1f}" fill="{chart.colour}" '
            f'data-value="{value:g}"><title>{when} UTC ({chart.period}): '
            f"{_number(value)}{escape(chart.unit)}</title></rect>"
        )
    if chart.starts:
        first = datetime.fromtimestamp(chart.starts[0], UTC).strftime("%H:%M")
        parts.append(
            f'<text x="4" y="{HEIGHT - 4}" font-size="10" fill="#5b6475">{first} UTC</text>'
            f'<text x="{WIDTH - 4}" y="{HEIGHT - 4}" font-size="10" fill="#5b6475" '
            'text-anchor="end">now</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))  # noqa: S704 (numbers, and escaped text only)


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"
