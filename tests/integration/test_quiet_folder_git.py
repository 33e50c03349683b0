"""The memo's entry for the whole schedule folder (``state/quiet-folder.json``): a tick
on a checkout git calls clean reads no schedule file while every schedule is quiet, on
this clone and on a fresh one (a CI runner's); anything git can see changed under the
folder, or cannot vouch for, makes the tick read it all again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from orchestrator.commands.context import Config
from orchestrator.commands.tick import executor_factory
from orchestrator.config.files import load_all
from orchestrator.config.repository import Cadence, RepoSettings
from orchestrator.state import codec, layout
from orchestrator.state import index as state_index
from orchestrator.state.phases import RunStatus
from orchestrator.state.records import Run, run_id_for
from orchestrator.store import GitStateStore, Snapshot
from orchestrator.tick import memo as quiet
from orchestrator.tick import memowrite
from orchestrator.tick.settings import TickSettings
from orchestrator.tick.shell import Tick
from tests.builders import spec_data
from tests.drive import tick
from tests.gitrepo import clone, git, make_origin

BRANCH = "orchestrator-state"
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SPECS = {
    "daily": spec_data(cron="0 3 * * *"),
    "berlin": spec_data(cron="30 6 * * 1-5", timezone="Europe/Berlin"),
    "off": spec_data(cron="*/5 * * * *", enabled=False),
}

# The tick as a process of its own, saying every file it opens under schedules/ (the
# interpreter's audit hook sees each open, whatever opens it).
OPENS = """
import os, runpy, sys
folder = os.path.join(os.getcwd(), "schedules") + os.sep
def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)) \\
            and os.path.abspath(os.fsdecode(args[0])).startswith(folder):
        print("OPENED", args[0], file=sys.stderr)
sys.addaudithook(hook)
sys.argv = ["orchestrator", *sys.argv[1:]]
runpy.run_module("orchestrator", run_name="__main__")
"""


@pytest.fixture(autouse=True)
def work_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCHESTRATOR_WORK_DIR", str(tmp_path / "work"))


def tip(repo: Path) -> str:
    return git("ls-remote", "origin", f"refs/heads/{BRANCH}", cwd=repo).split()[0]


def opened_by_a_tick(repo: Path, now: datetime) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", OPENS, "tick", "--now", now.isoformat()],
                          cwd=repo, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "ORCHESTRATOR_WORK_DIR": str(repo / ".work")})
    assert proc.returncode == 0, proc.stderr
    return [line.split(" ", 1)[1] for line in proc.stderr.splitlines()
            if line.startswith("OPENED ")]


def quiet_checkout(tmp_path: Path) -> Path:
    """A clone whose first tick wrote the cursors and the memo, the folder's entry too."""
    origin = make_origin(tmp_path, SPECS)
    repo = clone(origin, tmp_path / "repo")
    (repo / ".git" / "info" / "exclude").write_text(".work/\n")
    first = tick(repo, T0)
    assert first.mark_landed
    assert quiet.FOLDER in GitStateStore(repo, "origin", BRANCH).read().files
    return repo


def test_a_quiet_folder_is_not_read_on_this_clone_nor_on_a_fresh_one(tmp_path: Path) -> None:
    repo = quiet_checkout(tmp_path)
    written = tip(repo)

    result = tick(repo, T0 + timedelta(minutes=10))
    assert result.memo is not None and result.memo.whole == {"daily", "berlin", "off"}
    assert not result.mark_landed and tip(repo) == written
    # the same next due moment as a tick that reads everything
    assert result.wake is not None and result.wake.reason == "daily: slot 2026-12-02T03:00Z"

    assert opened_by_a_tick(repo, T0 + timedelta(minutes=20)) == []
    # another machine's checkout of the same commit: git's listing is the same there
    runner = clone(tmp_path / "origin.git", tmp_path / "runner")
    (runner / ".git" / "info" / "exclude").write_text(".work/\n")
    assert opened_by_a_tick(runner, T0 + timedelta(minutes=30)) == []
    assert tip(repo) == written
    # once a slot is due, the folder is read and the slot fired
    assert any(p.endswith("daily.json")
               for p in opened_by_a_tick(repo, T0 + timedelta(hours=15, minutes=1)))
    files = GitStateStore(repo, "origin", BRANCH).read().files
    assert "state/runs/daily--20261202T0300Z/run.json" in files


# The tick as a process of its own, saying which of the package's modules it loaded.
LOADED = """
import atexit, runpy, sys
atexit.register(lambda: print("LOADED", *sorted(m for m in sys.modules
                                                 if m.startswith("orchestrator")),
                               file=sys.stderr))
sys.argv = ["orchestrator", *sys.argv[1:]]
runpy.run_module("orchestrator", run_name="__main__")
"""

NOT_IDLE = ("orchestrator.planner", "orchestrator.executors.base",
            "orchestrator.executors.local", "orchestrator.config.triggers",
            "orchestrator.state.items", "orchestrator.state.queue", "orchestrator.notify")
"""What an idle tick never loads: the planner, an executor, the schedules' triggers,
the models of queue items, the notifications. (A branch with no run yet has no index
of open runs, so its tick reads every cursor, and with them the records' models; the
no-op tick of ``bench/instructions.py``, over 1,000 finished runs, reads none.)"""


def loaded_by_a_tick(repo: Path, now: datetime, *, verify: bool = False) -> tuple[str, ...]:
    env = {**os.environ, "ORCHESTRATOR_WORK_DIR": str(repo / ".work")}
    if not verify:  # the suite's check plans every idle tick: here it must not
        env.pop("ORCHESTRATOR_VERIFY_IDLE", None)
    proc = subprocess.run([sys.executable, "-c", LOADED, "tick", "--now", now.isoformat(),
                           "--json"], cwd=repo, capture_output=True, text=True, timeout=60,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["idle"]  # checked or not, the tick is idle
    line = next(x for x in proc.stderr.splitlines() if x.startswith("LOADED "))
    return tuple(line.split()[1:])


def test_a_quiet_tick_is_idle_and_loads_no_planner_executor_or_record_model(
        tmp_path: Path) -> None:
    repo = quiet_checkout(tmp_path)
    written = tip(repo)
    loaded = loaded_by_a_tick(repo, T0 + timedelta(minutes=10))
    assert "orchestrator.tick.idle" in loaded
    assert not [m for m in loaded if m.startswith(NOT_IDLE)], loaded
    assert tip(repo) == written
    # planned all the same (the suite's check), it loads them: the list above can fail
    checked = loaded_by_a_tick(repo, T0 + timedelta(minutes=11), verify=True)
    assert {"orchestrator.planner", "orchestrator.state.records"} <= set(checked)
    # once a slot is due, the tick is not idle: it plans and fires
    due = subprocess.run([sys.executable, "-m", "orchestrator", "tick", "--now",
                          (T0 + timedelta(hours=15, minutes=1)).isoformat(), "--json"],
                         cwd=repo, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "ORCHESTRATOR_WORK_DIR": str(repo / ".work")})
    assert due.returncode == 0, due.stderr
    out = json.loads(due.stdout)
    assert not out["idle"] and out["committed"]
    assert "daily--20261202T0300Z: fired" in " ".join(out["log"])


def edit(name: str, data: object) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        (folder / name).write_text(json.dumps(data))
    return apply


def every_five(folder: Path) -> None:
    edit("daily.json", spec_data(cron="*/5 * * * *"))(folder)


def staged(folder: Path) -> None:
    every_five(folder)
    git("add", "daily.json", cwd=folder)


def assumed_unchanged(folder: Path) -> None:
    git("update-index", "--assume-unchanged", "daily.json", cwd=folder)
    every_five(folder)


def ignored(folder: Path) -> None:
    (folder.parent / ".gitignore").write_text("schedules/soon.json\n")
    edit("soon.json", spec_data(cron="*/5 * * * *"))(folder)


def committed(folder: Path) -> None:
    every_five(folder)
    git("commit", "-qam", "every five minutes", cwd=folder)


def fifo(folder: Path) -> None:
    os.mkfifo(folder / "pipe.json")


def empty_folder(folder: Path) -> None:
    (folder / "dir.json").mkdir()


def symlink(folder: Path) -> None:
    (folder / "link.json").symlink_to("daily.json")


def deleted(folder: Path) -> None:
    (folder / "berlin.json").unlink()


# What the next tick must then do, which it cannot without reading the folder.
FIRES = "fires daily every five minutes"
NEW = "sees soon.json"
LINKED = "sees link.json"  # a symlink inside the repository is read as a schedule
NAMES = "names the file"
FORGETS = "leaves berlin out"


@pytest.mark.parametrize(("change", "then"), [
    (every_five, FIRES), (staged, FIRES), (assumed_unchanged, FIRES), (committed, FIRES),
    (edit("soon.json", spec_data(cron="*/5 * * * *")), NEW), (ignored, NEW),
    (symlink, LINKED), (fifo, NAMES), (empty_folder, NAMES), (deleted, FORGETS),
], ids=lambda v: v if isinstance(v, str) else getattr(v, "__name__", "untracked"))
def test_what_git_sees_changed_in_the_folder_makes_the_tick_read_it(
        tmp_path: Path, change: Callable[[Path], None], then: str) -> None:
    repo = quiet_checkout(tmp_path)
    change(repo / "schedules")
    now = T0 + timedelta(minutes=10)
    result = tick(repo, now)
    assert result.memo is not None and result.memo.whole is None
    files = GitStateStore(repo, "origin", BRANCH).read().files
    if then == FIRES:
        assert "state/runs/daily--20261201T1210Z/run.json" in files
    elif then in (NEW, LINKED):
        assert f"state/schedules/{then.split()[1][:-5]}.json" in files
    elif then == NAMES:
        assert any(name in e for e in result.schedule_errors
                   for name in ("pipe.json", "dir.json"))
    else:
        assert "berlin" not in result.memo.left_out
        assert [s.id for s in load_all(repo / "schedules").schedules] == ["daily", "off"]
    # and while the change stays, the folder is never vouched for
    result = tick(repo, now + timedelta(minutes=1))
    assert result.memo is not None and result.memo.whole is None


def test_an_edit_racing_the_tick_costs_the_folder_entry_not_a_slot(tmp_path: Path) -> None:
    repo = quiet_checkout(tmp_path)
    store = GitStateStore(repo, "origin", BRANCH)
    snap = store.read()
    now = T0 + timedelta(minutes=10)
    # the tick's steps, with an edit between git's listing and the reading of the files
    memo = quiet.Memo.read(snap.files, repo, now, RepoSettings.read(repo).key)
    assert memo.listing is not None and memo.whole is not None
    memo.forget()  # as when a slot of another schedule is due: the folder is read
    (repo / "schedules" / "daily.json").write_text(json.dumps(spec_data(cron="0 4 * * *")))
    result, loaded = quiet.select(memo, repo / "schedules", snap.files)
    state = loaded.state
    change = memowrite.changes(memo, result.schedules, state, snap.files,
                               {"state/ticks.jsonl": b"{}\n"}, Cadence)
    # the per-schedule entries stand (keyed by the bytes parsed); the folder's is gone
    assert json.loads(change[quiet.QUIET] or b"")["schedules"]["daily"]["until"] \
        == "2026-12-02T04:00:00Z"
    assert change.get(quiet.FOLDER, b"") is None


def test_a_disabled_schedule_and_a_fired_one_shot_stay_quiet_until_they_change(
        tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {**SPECS, "once": spec_data(cron=None,
                                                                 at="2026-12-01T12:05:00Z")})
    repo = clone(origin, tmp_path / "repo")
    tick(repo, T0)
    fired = tick(repo, T0 + timedelta(minutes=5))
    assert fired.mark_landed  # the one-shot's run, and the memo beside it
    files = GitStateStore(repo, "origin", BRANCH).read().files
    entries = json.loads(files[quiet.QUIET])["schedules"]
    assert entries["off"]["until"] is None
    assert "once" not in entries  # its run is open
    assert quiet.FOLDER not in files
    for minute in range(7, 30):  # the run ends (its track is a process of its own)
        tick(repo, T0 + timedelta(minutes=minute))
        files = GitStateStore(repo, "origin", BRANCH).read().files
        if "once" in json.loads(files[quiet.QUIET])["schedules"]:
            break
        time.sleep(0.1)
    assert json.loads(files[quiet.QUIET])["schedules"]["once"]["until"] is None
    result = tick(repo, T0 + timedelta(minutes=45))
    assert result.memo is not None and result.memo.whole == {"daily", "berlin", "off", "once"}
    assert result.wake is not None and result.wake.reason == "daily: slot 2026-12-02T03:00Z"


def test_a_file_git_is_told_to_assume_unchanged_is_never_vouched_for(tmp_path: Path) -> None:
    origin = make_origin(tmp_path, SPECS)
    repo = clone(origin, tmp_path / "repo")
    # set before the memo is written: git would then never see an edit of the file
    git("update-index", "--assume-unchanged", "schedules/daily.json", cwd=repo)
    first = tick(repo, T0)
    assert first.mark_landed and first.memo is not None and first.memo.listing is None
    assert quiet.FOLDER not in GitStateStore(repo, "origin", BRANCH).read().files
    every_five(repo / "schedules")
    tick(repo, T0 + timedelta(minutes=10))
    files = GitStateStore(repo, "origin", BRANCH).read().files
    assert "state/runs/daily--20261201T1210Z/run.json" in files


def test_an_open_run_of_a_quiet_schedule_makes_the_tick_read_it(tmp_path: Path) -> None:
    repo = quiet_checkout(tmp_path)
    store = GitStateStore(repo, "origin", BRANCH)
    slot = T0 - timedelta(days=1)
    run_id = run_id_for("daily", slot)
    run = Run(run_id=run_id, schedule_id="daily", slot=slot, fire_at=slot, created_at=slot,
              deadline=T0 + timedelta(hours=1), status=RunStatus.RUNNING, tracks=["a"])
    # opened again behind the memo's back (say, a dead letter requeued): no cursor moved
    store.transact(lambda s: state_index.refresh(s.files, {layout.run_path(run_id):
                                                           codec.to_json(run)}), "by hand")
    result = tick(repo, T0 + timedelta(minutes=10))
    assert result.memo is not None and result.memo.whole is None
    assert "daily" not in result.memo.left_out


def test_a_tick_that_loses_the_race_plans_every_schedule_on_the_new_tip(
        tmp_path: Path) -> None:
    origin = make_origin(tmp_path, {**SPECS, "hourly": spec_data(cron="0 * * * *")})
    repo = clone(origin, tmp_path / "repo")
    tick(repo, T0 - timedelta(minutes=30))
    tick(repo, T0 + timedelta(minutes=1))  # 12:00 fired and, once ended, quiet
    for minute in range(2, 30):
        result = tick(repo, T0 + timedelta(minutes=minute))
        if result.memo is not None and result.memo.whole is not None:
            break
        time.sleep(0.1)
    assert result.memo is not None and result.memo.whole is not None
    rival = GitStateStore(clone(origin, tmp_path / "rival"), "origin", BRANCH)
    cursor = layout.cursor_path("hourly")

    def pause(s: Snapshot) -> dict[str, bytes | None]:
        # another writer lands while the tick observes: hourly is paused
        data = json.loads(s.files[cursor])
        paused = {"by": "rival", "at": "2026-12-01T12:39:00Z", "reason": "a test"}
        return {cursor: json.dumps({**data, "paused": paused}).encode()}

    now = T0 + timedelta(minutes=40)
    factory = executor_factory(Config(repo=repo, remote="origin", state_branch=BRANCH),
                               "local", now)

    def observed_while_a_rival_lands(breaker: object) -> object:
        rival.transact(pause, "rival")
        return factory(breaker)  # type: ignore[arg-type]

    # a heartbeat is due: the tick has something to commit, and its push loses
    racing = Tick(GitStateStore(repo, "origin", BRANCH), repo,
                  observed_while_a_rival_lands, now,  # type: ignore[arg-type]
                  TickSettings(heartbeat_every=timedelta(minutes=1)))
    result = racing.run()
    assert result.memo is not None and result.memo.whole is None  # forgotten on the race
    assert result.mark_landed
    assert any(line.startswith("hourly: paused since 2026-12-01T12:39")
               for line in result.log), result.log
