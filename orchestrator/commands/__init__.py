"""One module per command (or command group), each exposing ``command``.

Add a new module's name to ``MODULES``; the command's name must equal the module's
name, with ``-`` for ``_`` (``cron_sync`` is ``cron-sync``). Modules are imported only
when their command runs (or for ``--help``), so a tick does not pay for jinja2 or the
GitHub client it does not use.

May import: every package below it (tick, brief, runs, cadence, notify, api, planner,
executors, state, github, config, store, cron, distribution, support, errors). Only
:mod:`orchestrator.cli` imports it.
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
    "cron_sync",
    "estimate",
    "outcome",
    "logs",
    "notify",
    "queue",
    "upgrade",
    "trigger",
    "backfill",
    "lateness",
    "clock",
    "event",
    "approve",
    "reject",
)


def load(name: str) -> click.Command | None:
    """The command called ``name``, importing only its module."""
    module = name.replace("-", "_")
    if module not in MODULES:
        return None
    command: click.Command = importlib.import_module(f"{__name__}.{module}").command
    return command
