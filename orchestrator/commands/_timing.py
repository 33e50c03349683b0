"""What ``validate`` says about the tick's cadence (and, in Markdown, the estimate).

Kept out of ``validate.py`` so that command stays about schedule files: this part
reads the workflows, ``orchestrator.json`` and, under an external clock, its file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..cadence.tickfile import check
from ..config.models import Schedule
from ..config.repository import load_repo_config
from ..errors import UserError


@dataclass
class CadenceReport:
    problems: list[str] = field(default_factory=list)
    """Each fails the check (a stale tick.yml, an invalid orchestrator.json)."""
    warnings: list[str] = field(default_factory=list)
    external: bool = False
    """Under an external clock (``"mode": "external"``): its file was checked too."""

    def to_json(self) -> dict[str, Any]:
        return {"problems": self.problems, "warnings": self.warnings}


def cadence_report(root: Path, schedules: list[Schedule], start: datetime) -> CadenceReport:
    try:
        config = load_repo_config(root)
    except UserError as exc:
        return CadenceReport(problems=[exc.message])
    problems, warnings = check(root, schedules, config, start)
    return CadenceReport(problems, warnings, config.cadence.mode == "external")


def text(report: CadenceReport) -> str:
    return "".join(f"warning: {w}\n" for w in report.warnings)


def markdown(report: CadenceReport, root: Path, schedules: list[Schedule],
             start: datetime) -> str:
    from . import estimate

    out = ["## The tick's cadence", ""]
    out += [f"> ❌ {p}  " for p in report.problems]
    out += [f"> ⚠️ {w}  " for w in report.warnings]
    moment = start.replace(second=0, microsecond=0)
    figures = estimate.build(root, schedules, moment)
    # no green check over an estimate that warns (a schedule missing most slots)
    if not report.problems and not report.warnings and not figures["orchestrator"]["warnings"]:
        out.append("✅ the external clock calls at every slot of the next year, and "
                   "tick.yml has its safety ticks." if report.external else
                   "✅ tick.yml has the ticks every slot of the next year needs.")
    out.append("")
    out.append(estimate.markdown(figures))
    return "\n".join(out)
