"""A newcomer's first hour, as README and the scaffold tell it: the commands are read
from the documents themselves and run as written, so the documents cannot drift from
what works."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.acceptance.cliuser import User, orchestrator
from tests.acceptance.readme import commands, section


def shell(command: str, cwd: Path, env: dict[str, str] | None = None
          ) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["sh", "-ec", command], cwd=cwd, capture_output=True, text=True,
                          timeout=300, check=False, env={**os.environ, **(env or {})})
    assert proc.returncode == 0, (f"{command}: exit {proc.returncode}\nstdout:\n{proc.stdout}"
                                  f"\nstderr:\n{proc.stderr}")
    return proc


def test_the_scaffold_s_examples_validate_without_warnings(tmp_path: Path) -> None:
    user = User(tmp_path / "mine")
    user.run("init", str(user.cwd), "--local", cwd=tmp_path)
    user.run("schedules", "remove", "nightly")
    readme = (user.cwd / "README.md").read_text()
    adds = [c for c in commands(section(readme, "Scheduled work (orchestrator)"))
            if c.startswith("orchestrator schedules add ")]
    assert len(adds) >= 2
    path = f"{Path(orchestrator()).parent}{os.pathsep}{os.environ['PATH']}"
    for command in adds:
        shell(command, user.cwd, {"PATH": path})
    checked = user.run("validate", "--preview", "5")
    assert checked.stdout.rstrip().endswith(f"{len(adds)} schedules valid, 0 invalid")
    assert "warning" not in checked.stdout + checked.stderr
