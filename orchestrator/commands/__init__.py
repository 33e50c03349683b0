"""One module per command (or command group), each exposing ``command``.

Add a new module's name to ``MODULES``; the command's name must equal the module's
name. Modules are imported only when their command runs (or for ``--help``), so a
tick does not pay for jinja2 or the GitHub client it does not use.
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
    "status",
    "serve",
    "init",
)


def load(name: str) -> click.Command | None:
    """The command called ``name``, importing only its module."""
    if name not in MODULES:
        return None
    command: click.Command = importlib.import_module(f"{__name__}.{name}").command
    return command
