"""``orchestrator schema``: print the JSON Schema of a schedule file, of a calendar
file, of orchestrator.json, of a notification event or of the static JSON API's files."""

from __future__ import annotations

import json

import click

from ..config.files import schema_text


@click.command("schema")
@click.option("--config", "config", is_flag=True,
              help="The schema of orchestrator.json (repository settings) instead.")
@click.option("--event", "event", is_flag=True,
              help="The schema of a notification event (what a json webhook receives).")
@click.option("--calendar", "calendar", is_flag=True,
              help="The schema of a shared calendar, calendars/*.json, instead.")
@click.option("--api", "api", is_flag=True,
              help="The schemas of the static JSON API's files (render --api), by kind.")
def command(config: bool, event: bool, calendar: bool, api: bool) -> int:
    """Print the JSON Schema of schedules/*.json.

    Regenerate the committed copies with: orchestrator schema > schedules/schedule.schema.json
    and orchestrator schema --calendar > calendars/calendar.schema.json
    """
    if config + event + calendar + api > 1:
        raise click.UsageError("--config, --event, --calendar and --api: give one")
    if api:
        from ..api.models import json_schemas

        click.echo(json.dumps(json_schemas(), indent=2, ensure_ascii=False))
        return 0
    if calendar:
        from ..config.calendar_file import schema_text as calendar_schema

        click.echo(calendar_schema(), nl=False)
        return 0
    if event:
        from ..notify.events import event_json_schema

        click.echo(json.dumps(event_json_schema(), indent=2, ensure_ascii=False))
        return 0
    if config:
        from ..config.repository import repo_config_json_schema

        click.echo(json.dumps(repo_config_json_schema(), indent=2, ensure_ascii=False))
        return 0
    click.echo(schema_text(), nl=False)
    return 0
