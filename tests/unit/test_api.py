"""The static JSON API and its badges, built from a branch on the in-memory store:
every file valid by its own schema, redacted, bounded, named only by checked ids."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from datetime import timedelta

import jsonschema
import pytest

from orchestrator.api import badges, documents, models, site
from orchestrator.cadence import lateness
from orchestrator.config.policies import Pause
from orchestrator.errors import InvalidId
from orchestrator.runs import queues
from orchestrator.state import codec, layout
from orchestrator.state.items import NewItem
from orchestrator.state.phases import RunStatus, TrackPhase
from orchestrator.state.records import Act, Cursor, Run
from orchestrator.store import InMemoryStateStore
from orchestrator.support.credentials import Redactor
from tests.builders import run_files, schedule, track
from tests.unit.test_dashboard import INVALID, NOW, SCHEDULES, T0, branch

TOKEN = "ghp_" + "A1b2C3d4E5" * 4
"""Shaped like a GitHub token: the redactor knows it whatever its origin."""
SECRET = "hunter2-but-longer"
"""A credential of the environment: only the redactor given it knows it."""
STALE = timedelta(minutes=90)


def with_queue(files: dict[str, bytes]) -> dict[str, bytes]:
    change, _ = queues.add(files, "work", [NewItem(payload={"n": i}) for i in range(3)],
                           T0, "alice")
    assert change is not None
    files.update({path: data for path, data in change.items() if data is not None})
    return files


def snapshot(files: dict[str, bytes]) -> dict[str, bytes]:
    return dict(InMemoryStateStore(files).read().files)


def tree(files: dict[str, bytes], schedules=SCHEDULES, redact: Redactor | None = None
         ) -> dict[str, bytes]:
    inputs = site.inputs_from_files(snapshot(files), schedules, INVALID, NOW, NOW, STALE)
    return site.tree(inputs, redact or Redactor())


def kind_of(path: str) -> str | None:
    """The schema kind of an API path (``None``: a badge or a schema)."""
    name = path.removeprefix("api/v1/")
    for prefix, kind in (("schedules/", "schedule"), ("runs/page-", "runs-page"),
                         ("runs/", "run"), ("queues/", "queue")):
        if name.startswith(prefix):
            return kind
    return {"index.json": "index", "queues.json": "queues"}.get(name)


def test_every_file_validates_against_its_own_schema() -> None:
    files = tree(with_queue(branch()))
    kinds = {path: kind_of(path) for path in files}
    assert {"index", "schedule", "run", "runs-page", "queues", "queue"} <= set(kinds.values())
    for path, kind in kinds.items():
        if kind is None:
            continue
        data = json.loads(files[path])
        schema = json.loads(files[f"api/v1/schemas/{kind}.schema.json"])
        assert schema == models.json_schema(kind)
        assert data["$schema"] == schema["$id"] and data["api_version"] == 1
        jsonschema.Draft202012Validator.check_schema(schema)
        jsonschema.validate(data, schema, cls=jsonschema.Draft202012Validator)


def test_a_schema_refuses_a_file_of_another_shape() -> None:
    """The validation above could not pass by accident: a wrong file fails it."""
    data = json.loads(tree(branch())["api/v1/index.json"])
    del data["heartbeat"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, models.json_schema("index"))


def test_the_index_answers_did_last_nights_run_succeed_in_one_fetch() -> None:
    index = json.loads(tree(with_queue(branch()))["api/v1/index.json"])
    nightly, hourly, quiet = index["schedules"]
    assert nightly["last_run"]["run_id"] == "nightly--20261203T0700Z"
    assert nightly["last_run"]["status"] == "failed"
    assert nightly["success"] == {"runs": 3, "succeeded": 2, "failed": 1, "cancelled": 0,
                                  "rate": 0.6667}
    assert len(nightly["next_slots"]) == 3
    assert (hourly["state"], hourly["next_slots"]) == ("paused", [])
    assert quiet["state"] == "disabled"
    assert index["heartbeat"]["last_tick"] == "2026-12-04T08:00:00Z"
    assert index["runs"] == {"total": 4, "pages": 1, "newest_page": "api/v1/runs/page-1.json"}


def test_a_schedule_file_has_its_definition_slots_runs_and_dead_letters() -> None:
    doc = json.loads(tree(branch())["api/v1/schedules/nightly.json"])
    assert doc["definition"]["cron"] == "15 2 * * *"
    assert len(doc["next_slots"]) == 20
    assert [r["run_id"] for r in doc["runs"]] == [
        f"nightly--2026120{d}T0700Z" for d in (3, 2, 1)]
    assert doc["runs"][0]["tracks"]["a"]["phase"] == "complete"
    assert [d["key"] for d in doc["dead_letters"]] == ["nightly--20261203T0700Z--a"]


def test_a_queue_file_counts_its_items() -> None:
    files = tree(with_queue(branch()))
    listing = json.loads(files["api/v1/queues.json"])
    assert [(q["queue"], q["backlog"], q["href"]) for q in listing["queues"]] == [
        ("work", 3, "api/v1/queues/work.json")]
    doc = json.loads(files["api/v1/queues/work.json"])
    assert (doc["in_flight"], doc["dead"], doc["throughput_per_day"]) == (0, 0, {})


def hostile_branch() -> dict[str, bytes]:
    """A run whose track printed a token and a secret into every field it writes, and a
    cancel whose reason quotes them."""
    files = branch()
    run_id = "nightly--20261204T0700Z"
    files.update(run_files(run_id, RunStatus.FAILED, T0 + timedelta(days=3, minutes=5)))
    run = codec.parse_record(Run, layout.run_path(run_id), files[layout.run_path(run_id)])
    files[layout.run_path(run_id)] = codec.to_json(run.model_copy(update={
        "cancelled": Act(by="alice", at=T0, reason=f"leaked {TOKEN} and {SECRET}")}))
    files[layout.track_path(run_id, "a")] = codec.to_json(track(
        "a", TrackPhase.FAILED, run_id=run_id,
        url=f"https://x-access-token:{SECRET}@example.com/log",
        result={"summary": f"printed {TOKEN} {SECRET}", "raw": "track output, not shown"},
        error_log=[f"line {n}" for n in range(10)] + [f"exit 1: {TOKEN} {SECRET}"]))
    return files


def test_a_token_a_track_printed_is_in_no_file() -> None:
    files = tree(hostile_branch(), redact=Redactor([SECRET]))
    assert b"printed ***" in files["api/v1/runs/nightly--20261204T0700Z.json"]
    for path, data in files.items():
        assert TOKEN.encode() not in data, path
        assert SECRET.encode() not in data, path
        assert b"track output, not shown" not in data, path


def test_a_run_file_keeps_only_what_the_brief_shows_of_a_track() -> None:
    doc = json.loads(tree(hostile_branch())["api/v1/runs/nightly--20261204T0700Z.json"])
    a = doc["tracks"]["a"]
    assert set(a["result"]) == {"summary"}
    assert len(a["error_log"]) == 5 and a["error_log"][0] == "line 6"
    assert doc["links"] == {"brief": "runs/nightly--20261204T0700Z/brief.html",
                            "schedule": "api/v1/schedules/nightly.json",
                            "ci": ["https://***@example.com/log"]}
    assert doc["run"]["run_id"] == "nightly--20261204T0700Z"


@pytest.mark.parametrize(("make", "name"), [
    (documents.schedule_file, "../etc"), (documents.schedule_file, "a/b"),
    (documents.badge_file, ".."), (documents.queue_file, "../q"),
    (documents.run_file, "../x--20261201T0700Z"), (documents.run_file, "page-1"),
])
def test_a_name_that_is_no_id_becomes_no_path(make, name: str) -> None:
    with pytest.raises(InvalidId):
        make(name)


def many_runs(per_schedule: int) -> dict[str, bytes]:
    files = branch()
    for sid in ("nightly", "hourly", "quiet"):
        for n in range(per_schedule):
            slot = T0 - timedelta(hours=n + 1)
            files.update(run_files(f"{sid}--{slot:%Y%m%dT%H%MZ}", RunStatus.COMPLETED,
                                   slot + timedelta(minutes=5), tracks=("a", "b")))
    return files


def test_the_indexes_stay_bounded_whatever_the_history() -> None:
    small, large = tree(many_runs(10)), tree(many_runs(250))
    for path in ("api/v1/index.json", "api/v1/schedules/quiet.json"):
        assert len(large[path]) < 2 * len(small[path]) + 16_384, path
    quiet = json.loads(large["api/v1/schedules/quiet.json"])
    assert (len(quiet["runs"]), quiet["runs_total"]) == (50, 250)
    index = json.loads(large["api/v1/index.json"])
    assert index["runs"]["pages"] == 8 and index["schedules"][2]["success"]["runs"] == 30
    pages = [p for p in large if p.startswith("api/v1/runs/page-")]
    assert len(pages) == 8
    newest = json.loads(large["api/v1/runs/page-8.json"])
    assert newest["runs"][0]["run_id"] == "hourly--20261204T0700Z"
    assert len(json.loads(large["api/v1/runs/page-1.json"])["runs"]) == 100
    assert max(len(data) for data in large.values()) < 1024 * 1024


def test_a_new_run_changes_the_newest_page_and_no_other() -> None:
    """Pages say nothing of the instant or of the other pages: the index says how many
    there are, so a page that gained no run keeps its bytes."""
    files = many_runs(60)
    before = tree(files)
    files.update(run_files("nightly--20261204T0800Z", RunStatus.COMPLETED, NOW))
    after = tree(files)
    pages = sorted((p for p in after if p.startswith("api/v1/runs/page-")),
                   key=lambda p: int(p.rpartition("-")[2].removesuffix(".json")))
    assert [p for p in pages if before.get(p) != after[p]] == [pages[-1]]
    index = json.loads(after["api/v1/index.json"])["runs"]
    assert (index["total"], index["newest_page"]) == (3 * 60 + 5, pages[-1])


def parsed(svg: str) -> ET.Element:
    root = ET.fromstring(svg.encode())
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    return root


def title_of(svg: str) -> str:
    found = parsed(svg).find("{http://www.w3.org/2000/svg}title")
    assert found is not None and found.text
    return found.text


def test_badges_are_svg_with_a_title_and_nothing_external() -> None:
    files = tree(branch())
    assert title_of(files["badges/nightly.svg"].decode()) == "nightly: failed 1d ago"
    assert title_of(files["badges/hourly.svg"].decode()) == "hourly: paused"
    assert title_of(files["badges/repository.svg"].decode()) == "schedules: 1 failing"
    for path in (p for p in files if p.startswith("badges/")):
        text = files[path].decode()
        assert 'aria-label="' + title_of(text) + '"' in text
        assert "href" not in text and "@import" not in text and "url(" not in text
        assert 'fill="#cf222e"' in text or "failed" not in title_of(text)


def test_a_schedule_failing_in_a_row_says_how_often() -> None:
    files = branch()
    files[layout.cursor_path("nightly")] = codec.to_json(Cursor(
        schedule_id="nightly", since=T0, failures_in_a_row=3))
    assert title_of(tree(files)["badges/nightly.svg"].decode()) == "nightly: failing x3"


def test_the_repository_badge_puts_a_stale_tick_first() -> None:
    index = models.Index.model_validate(json.loads(tree(branch())["api/v1/index.json"]))
    stale = index.model_copy(update={"heartbeat": index.heartbeat.model_copy(
        update={"stale": True})})
    assert title_of(badges.repository_badge(stale)) == "schedules: tick stale"
    assert badges.repository_message([], stale=False) == ("no schedules", "none")


def test_a_paused_badge_says_paused_and_not_the_reason() -> None:
    files = branch()
    files[layout.cursor_path("nightly")] = codec.to_json(Cursor(
        schedule_id="nightly", since=T0, paused=Pause(by="a", at=T0, reason="<x>&")))
    one = schedule("nightly", cron="15 2 * * *")
    svg = tree(files, schedules=[one])["badges/nightly.svg"].decode()
    assert title_of(svg) == "nightly: paused" and "<x>" not in svg


def test_a_run_of_many_long_tracks_keeps_less_of_each_and_stays_under_a_mebibyte() -> None:
    files = branch()
    run_id = "nightly--20261204T0700Z"
    names = [f"t{n:03d}" for n in range(400)]
    files.update(run_files(run_id, RunStatus.FAILED, T0 + timedelta(days=3, minutes=5),
                           tracks=names))
    for name in names:
        files[layout.track_path(run_id, name)] = codec.to_json(track(
            name, TrackPhase.FAILED, run_id=run_id, run="x" * 4000,
            result={"summary": "s" * 2000}, error_log=["e" * 1000] * 8))
    data = tree(files)[f"api/v1/runs/{run_id}.json"]
    assert len(data) <= documents.FILE_LIMIT
    doc = json.loads(data)
    assert doc["detail"] == "short" and len(doc["tracks"]) == 400
    assert doc["tracks"]["t000"]["error_log"] == ["e" * 159 + "…"]
    assert "spec" not in doc["tracks"]["t000"]


def test_a_run_record_naming_another_path_writes_no_file_and_stops_nothing() -> None:
    files = branch()
    run_id = "nightly--20261204T0700Z"
    files.update(run_files(run_id))
    run = codec.parse_record(Run, layout.run_path(run_id), files[layout.run_path(run_id)])
    files[layout.run_path(run_id)] = codec.to_json(run.model_copy(
        update={"run_id": "../../evil--20261204T0700Z"}))
    found = tree(files)
    assert not [p for p in found if "evil" in p or ".." in p]
    assert "api/v1/runs/nightly--20261203T0700Z.json" in found


def test_the_index_gives_cron_lateness_once_ticks_left_samples() -> None:
    assert json.loads(tree(branch())["api/v1/index.json"])["cron_lateness"] is None
    files = branch()
    slots = [NOW - timedelta(hours=h) for h in (3, 2, 1)]
    files[layout.LATENESS] = b"".join(
        lateness.Sample("0 * * * *", slot, slot + timedelta(minutes=m),
                        slot + timedelta(minutes=m + 1), run=n).line()
        for n, (slot, m) in enumerate(zip(slots, (4, 9, 20), strict=True)))
    inputs = site.inputs_from_files(snapshot(files), SCHEDULES, INVALID, NOW, NOW, STALE,
                                    ["0 * * * *"])
    index = json.loads(site.tree(inputs, Redactor())["api/v1/index.json"])
    assert index["cron_lateness"] == {"days": 7, "samples": 3, "p50_seconds": 540.0,
                                      "p95_seconds": 1200.0, "max_seconds": 1200.0,
                                      "dropped": 0}


def test_a_summary_that_is_no_string_reads_as_in_the_brief() -> None:
    files = branch()
    run_id = "nightly--20261204T0700Z"
    files.update(run_files(run_id))
    files[layout.track_path(run_id, "a")] = codec.to_json(track(
        "a", run_id=run_id, result={"summary": {"rows": 3}}))
    doc = json.loads(tree(files)[f"api/v1/runs/{run_id}.json"])
    assert doc["tracks"]["a"]["result"] == {"summary": '{"rows": 3}'}
