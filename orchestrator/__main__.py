"""``python -m orchestrator``: the same as the ``orchestrator`` command."""

from .cli import run

run()
