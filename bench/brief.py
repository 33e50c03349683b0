"""Render time of the brief for 4, 64 and 256 tracks.

    python bench/brief.py [--repeat N]

For each size: the median time of ``render_html`` and ``render_markdown`` over N runs
(the template compiled once beforehand, as in a long-lived process; the first, cold
render is shown apart), next to a baseline measured in the same run: serialising the
same context to JSON, i.e. the least work any renderer must do to read every field.
Prints a Markdown table for bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the fixtures with plausible histories

from briefdata import four_track_run, many_track_run  # noqa: E402

from orchestrator import brief  # noqa: E402


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def json_dump(ctx: brief.BriefContext) -> str:
    return json.dumps({
        "run": ctx.run.model_dump(mode="json", by_alias=True),
        "tracks": [t.model_dump(mode="json", by_alias=True) for t in ctx.tracks],
        "dead_letters": [d.model_dump(mode="json", by_alias=True) for d in ctx.dead_letters],
        "polls": ctx.polls,
    }, sort_keys=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()

    start = time.perf_counter()
    brief.render_html(four_track_run())
    cold = (time.perf_counter() - start) * 1000

    print("| tracks | HTML ms | Markdown ms | JSON baseline ms | HTML / baseline "
          "| HTML size | Markdown size |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in (4, 64, 256):
        ctx = four_track_run() if n == 4 else many_track_run(n)
        html = brief.render_html(ctx)
        markdown = brief.render_markdown(ctx)
        t_html = median_ms(lambda c=ctx: brief.render_html(c), args.repeat)
        t_md = median_ms(lambda c=ctx: brief.render_markdown(c), args.repeat)
        t_json = median_ms(lambda c=ctx: json_dump(c), args.repeat)
        print(f"| {n} | {t_html:.1f} | {t_md:.1f} | {t_json:.2f} | {t_html / t_json:.0f}x "
              f"| {len(html.encode()) / 1024:.0f} KiB | {len(markdown.encode()) / 1024:.0f} KiB |")
    print(f"\nFirst render in a fresh process (template compile included): {cold:.0f} ms; "
          f"median of {args.repeat} runs per cell.")


if __name__ == "__main__":
    main()
