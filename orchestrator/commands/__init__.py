"""One module per command (or command group), each exposing ``command``.

Add a new module's name to ``MODULES``; :func:`load` imports them in order.
"""

from __future__ import annotations

import importlib

import click

MODULES: tuple[str, ...] = (
    "render",
    "validate",
    "schema",
    "schedules",
    "tick",
    "runs",
    "dlq",
    "demo",
    "report",
    "compact",
)


def load() -> list[click.Command]:
    return [importlib.import_module(f"{__name__}.{name}").command for name in MODULES]
