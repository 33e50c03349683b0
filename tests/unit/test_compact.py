"""Which runs `orchestrator compact` archives (pure, plain datetimes)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from orchestrator.config.models import TrackSpec
from orchestrator.runs.compaction import archive_tag, plan
from orchestrator.state.codec import to_json
from orchestrator.state.layout import dlq_path, run_path
from orchestrator.state.phases import RunStatus
from orchestrator.state.records import DeadLetter, Run, Transition
from tests.builders import run_files

NOW = datetime(2026, 12, 31, 12, 0, tzinfo=UTC)


def letter(run_id: str, discarded: bool) -> dict[str, bytes]:
    key = f"{run_id}--a"
    dl = DeadLetter(key=key, run_id=run_id, track="a", reason="failed", parked_at=NOW,
                    attempts=1, payload=TrackSpec(name="a", run="x"), discarded=discarded)
    return {dlq_path(key): to_json(dl)}


OLD = NOW - timedelta(days=30)
RECENT = NOW - timedelta(days=2)


def test_only_finished_runs_older_than_the_cutoff_are_archived() -> None:
    files = {
        **run_files("a--20261130T0700Z", RunStatus.COMPLETED, OLD, also=("brief",)),
        **run_files("b--20261130T0700Z", RunStatus.FAILED, OLD, also=("brief",)),
        **letter("b--20261130T0700Z", discarded=True),
        **run_files("c--20261130T0700Z", RunStatus.FAILED, OLD, also=("brief",)),
        **letter("c--20261130T0700Z", discarded=False),  # waits for a human: keep
        **run_files("d--20261229T0700Z", RunStatus.COMPLETED, RECENT, also=("brief",)),
        **run_files("e--20261130T0700Z", RunStatus.RUNNING, None, also=("brief",)),
        **run_files("f--20261130T0700Z", RunStatus.CONSOLIDATING, None, also=("brief",)),
        "state/ticks.jsonl": b"{}\n",
        "state/schedules/a.json": b"{}\n",
    }
    p = plan(files, 7, NOW)
    assert p.runs == ("a--20261130T0700Z", "b--20261130T0700Z")
    assert p.dead_letters == ("state/dlq/b--20261130T0700Z--a.json",)
    assert set(p.change) == {
        "state/runs/a--20261130T0700Z/run.json", "state/runs/a--20261130T0700Z/tracks/a.json",
        "state/runs/a--20261130T0700Z/brief.html",
        "state/runs/b--20261130T0700Z/run.json", "state/runs/b--20261130T0700Z/tracks/a.json",
        "state/runs/b--20261130T0700Z/brief.html",
        "state/dlq/b--20261130T0700Z--a.json"}
    assert all(v is None for v in p.change.values())


def test_the_cutoff_is_exclusive_and_keep_days_zero_archives_every_finished_run() -> None:
    files = run_files("a--20261130T0700Z", RunStatus.COMPLETED, NOW - timedelta(days=7),
                      also=("brief",))
    assert plan(files, 7, NOW).runs == ()
    assert plan(files, 6, NOW).runs == ("a--20261130T0700Z",)
    assert plan(files, 0, NOW).runs == ("a--20261130T0700Z",)


def test_a_terminal_run_without_finished_at_uses_its_last_transition() -> None:
    files = run_files("a--20261130T0700Z", RunStatus.COMPLETED, None, also=("brief",))
    run = Run.model_validate_json(files[run_path("a--20261130T0700Z")])
    run = run.model_copy(update={"state_history": [
        Transition(from_="consolidating", to="completed", at=OLD)]})
    files[run_path("a--20261130T0700Z")] = to_json(run)
    assert plan(files, 7, NOW).runs == ("a--20261130T0700Z",)


def test_run_ids_sharing_a_prefix_are_not_swept_along() -> None:
    files = {**run_files("a--20261130T0700Z", RunStatus.COMPLETED, OLD, also=("brief",)),
             **run_files("a-b--20261130T0700Z", RunStatus.RUNNING, None, also=("brief",))}
    assert all(path.startswith("state/runs/a--") for path in plan(files, 7, NOW).change)


def test_nothing_to_archive_is_an_empty_change() -> None:
    assert plan({}, 7, NOW).change == {}


def test_archive_tag_names_the_utc_time() -> None:
    assert archive_tag(NOW) == "orchestrator-archive/20261231T120000Z"
