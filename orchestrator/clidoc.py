"""The CLI reference, ``docs/cli.md``, generated from the click tree.

Every command and every option, with its help text, default and environment
variable, as click knows them, so the reference cannot drift from the code: a test
compares the committed file with :func:`render`. Regenerate it with
``python3 -m orchestrator.clidoc > docs/cli.md``.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Iterator

import click

from . import errors
from .cli import cli

EXIT_CODES = {
    errors.EXIT_OK: "ok",
    errors.EXIT_USER: "user error (a bad argument, file or state, named in one line)",
    errors.EXIT_USAGE: "usage error (an unknown option, a missing required one)",
    errors.EXIT_REMOTE: "remote unreadable or unwritable",
    errors.EXIT_UNEXPECTED: "unexpected error",
    errors.EXIT_STALE: "`status`: the last tick is stale",
    errors.EXIT_DEAD_LETTERS: "`status --fail-on-dead-letters`: dead letters wait",
    errors.EXIT_INVALID_SCHEDULES: "`status`: schedule files are invalid and never fire",
}
"""Every exit code, by meaning (a test checks that :mod:`orchestrator.errors` defines no
other)."""

HEADER = """# Command line reference

Generated from the code by `python3 -m orchestrator.clidoc > docs/cli.md`; a test fails
when it is out of date. The other pages explain the commands; this lists every option.
An option marked **required** must be given.

Exit codes:

{codes}
"""


def _exit_codes() -> str:
    return "\n".join(f"- {code}: {meaning}" for code, meaning in sorted(EXIT_CODES.items()))


def _walk(ctx: click.Context) -> Iterator[click.Context]:
    yield ctx
    command = ctx.command
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from _walk(click.Context(sub, info_name=name, parent=ctx))


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _value(param: click.Option) -> str:
    if param.is_flag:
        return ""
    kind = param.type
    if isinstance(kind, click.Choice):
        return "|".join(str(c) for c in kind.choices)
    name = param.metavar or kind.name.upper()
    if isinstance(kind, click.IntRange | click.FloatRange):
        name = param.metavar or ("INTEGER" if isinstance(kind, click.IntRange) else "NUMBER")
        bounds = [f">= {kind.min}" if kind.min is not None else "",
                  f"<= {kind.max}" if kind.max is not None else ""]
        name += f" ({', '.join(b for b in bounds if b)})" if any(bounds) else ""
    return name


def _default(param: click.Option) -> str:
    if param.required:
        return "**required**"
    default = param.default
    # click 8.3 marks "no default" with a sentinel object of its own, not None
    unset = type(default).__name__ == "Sentinel"
    if param.is_flag or unset or default is None or default == () or callable(default):
        return ""
    return f"`{default}`"


def _field_help() -> dict[str, str]:
    """Descriptions of the schedule's fields, for options named after one (the options
    of ``schedules add`` write exactly these fields)."""
    from .config.models import DstPolicy, ScheduleSpec, TrackSpec

    found: dict[str, str] = {}
    for prefix, model in (("", ScheduleSpec), ("", TrackSpec), ("dst_", DstPolicy)):
        for name, info in model.model_fields.items():
            found.setdefault(prefix + name, info.description or "")
    found["as_json"] = "Print JSON instead of text."
    return found


def _option_rows(command: click.Command) -> list[str]:
    rows = []
    fields = _field_help()
    for param in command.params:
        if not isinstance(param, click.Option) or param.hidden:
            continue
        names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
        value = _value(param)
        meaning = _cell(param.help or fields.get(param.name or "", ""))
        if param.envvar and "[env:" not in meaning:
            envvars = [param.envvar] if isinstance(param.envvar, str) else param.envvar
            meaning += (" " if meaning else "") + "Environment: " + ", ".join(
                f"`{e}`" for e in envvars) + "."
        if param.multiple:
            meaning += (" " if meaning else "") + "May be repeated."
        rows.append(f"| {names} | {_cell(value)} | {_default(param)} | {meaning} |")
    return rows


def _usage(ctx: click.Context) -> str:
    pieces = ctx.command.collect_usage_pieces(ctx)
    return " ".join([ctx.command_path, *pieces])


def render() -> str:
    """The whole reference, as Markdown."""
    out = [HEADER.format(codes=_exit_codes())]
    root = click.Context(cli, info_name="orchestrator", max_content_width=100)
    for ctx in _walk(root):
        command = ctx.command
        title = ctx.command_path
        out.append(f"## `{title}`\n")
        out.append(f"```\n{_usage(ctx)}\n```\n")
        text = inspect.cleandoc(command.help or "").replace("\b\n", "")
        if text:
            out.append(text + "\n")
        if isinstance(command, click.Group) and ctx.parent is not None:
            subs = [n for n in command.list_commands(ctx)
                    if (c := command.get_command(ctx, n)) is not None and not c.hidden]
            out.append("Subcommands: " + ", ".join(f"`{n}`" for n in subs) + ".\n")
        rows = _option_rows(command)
        if rows:
            if ctx.parent is None:
                out.append("Options of the `orchestrator` command itself, given before the "
                           "subcommand (`orchestrator --repo PATH tick`):\n")
            out.append("| option | value | default | meaning |\n|---|---|---|---|")
            out.append("\n".join(rows) + "\n")
    return "\n".join(out).rstrip("\n") + "\n"


if __name__ == "__main__":  # pragma: no cover - the regeneration command
    sys.stdout.write(render())
