"""The README's first command, as a user runs it: the installed console script."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent.parent


def orchestrator() -> str:
    beside = Path(sys.executable).with_name("orchestrator")
    found = str(beside) if beside.exists() else shutil.which("orchestrator")
    assert found, "the orchestrator console script is not installed (pip install -e .)"
    return found


def test_validate_with_preview_on_the_shipped_examples() -> None:
    proc = subprocess.run([orchestrator(), "validate", "--preview", "3"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert "nightly  (schedules/nightly.json)" in proc.stdout
    assert proc.stdout.count("next:") >= 2
    assert proc.stdout.rstrip().endswith("0 invalid")


def test_schema_command_prints_the_committed_schema() -> None:
    proc = subprocess.run([orchestrator(), "schema"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60, check=True)
    assert proc.stdout == (REPO_ROOT / "schedules" / "schedule.schema.json").read_text()
