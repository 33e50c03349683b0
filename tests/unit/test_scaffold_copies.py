"""``orchestrator init`` ships copies of this repository's own files: they must not drift."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.commands import init

REPO = Path(__file__).resolve().parent.parent.parent


@pytest.mark.parametrize("rel", sorted(init.scaffold_files(pages=True)))
def test_every_scaffold_file_equals_this_repository_s_own(rel: str) -> None:
    shipped = init.scaffold_files(pages=True)[rel]
    assert shipped == (REPO / rel).read_text(encoding="utf-8"), (
        f"{rel} differs from the copy init writes; copy it to orchestrator/data/scaffold")


def test_every_user_facing_workflow_is_scaffolded() -> None:
    """A new workflow in .github/workflows is either scaffolded or the project's own
    (its CI, the publishing of its documentation site, its release)."""
    ours = {p.name for p in (REPO / ".github" / "workflows").glob("*.yml")}
    own = {"ci.yml", "docs.yml", "release.yml"}
    assert ours - own == set(init.WORKFLOWS) | set(init.OPTIONAL_WORKFLOWS)


def test_no_stray_files_in_the_scaffold_folder() -> None:
    shipped = {p.relative_to(init.SCAFFOLD).as_posix()
               for p in init.SCAFFOLD.rglob("*") if p.is_file()}
    used = {f"workflows/{n}" for n in init.WORKFLOWS + init.OPTIONAL_WORKFLOWS}
    used |= {f"schedules/{init.EXAMPLE}", init.README_SECTION.name}
    assert shipped == used
