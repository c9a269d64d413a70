"""The runs page's small chart: a playbook's run durations over time, as inline SVG drawn
here (no charting library, no script): a line through the durations, a dot per run."""

from __future__ import annotations

from typing import Any

from markupsafe import Markup, escape

WIDTH, HEIGHT, PAD = 320, 64, 4


def sparkline(points: list[dict[str, Any]]) -> Markup:
    """`points`: {id, started, duration_s}, oldest first. Each dot's title names the run."""
    if not points:
        return Markup("")
    longest = max(p["duration_s"] for p in points) or 1.0
    step = (WIDTH - 2 * PAD) / max(1, len(points) - 1)
    coords = [(PAD + i * step, HEIGHT - PAD - (p["duration_s"] / longest) * (HEIGHT - 2 * PAD))
              for i, p in enumerate(points)]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    dots = "".join(
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5"><title>{escape(p["id"])}: {p["duration_s"]:.1f}s '
        f'({escape(p["started"])})</title></circle>' for (x, y), p in zip(coords, points, strict=True))
    return Markup(
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
        f'aria-label="durations of the latest {len(points)} runs, longest {longest:.1f}s">'
        f'<polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{line}"/>{dots}</svg>')
