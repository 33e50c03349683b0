"""``orchestrator schema``: print the JSON Schema of a schedule file."""

from __future__ import annotations

import click

from ..schedules import schema_text


@click.command("schema")
def command() -> int:
    """Print the JSON Schema of schedules/*.json.

    Regenerate the committed copy with: orchestrator schema > schedules/schedule.schema.json
    """
    click.echo(schema_text(), nl=False)
    return 0
