"""The store contract: the cases every :class:`~orchestrator.store.StateStore` passes.

One suite, run against each store: a tier subclasses :class:`StoreContract` in a
``test_*.py`` module and provides the ``backend_factory`` fixture. The in-memory store
runs it in ``tests/unit`` (no I/O), the git store against a bare origin in
``tests/integration``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from orchestrator.errors import CASExhausted
from orchestrator.store import Change, Snapshot, Stamped, StateStore, blob_id


@dataclass
class Backend:
    """A store under test, and a way to get another writer on the same state."""

    store: StateStore
    rival: Callable[[], StateStore]
    commits: Callable[[], int]


BackendFactory = Callable[..., Backend]
"""Makes a fresh :class:`Backend`; keyword arguments go to the store's constructor."""


def _put(path: str, data: bytes) -> Callable[[Snapshot], Change]:
    return lambda _snap: {path: data}


TREE: dict[str, bytes] = {
    "state/runs/a--20261201T0700Z/run.json": b'{"x": 1}\n',
    "state/runs/a--20261201T0700Z/tracks/t.json": b"{}\n",
    "state/runs/a--20261201T0700Z/tracks/t-b.json": b"[]\n",  # '-' sorts before '.'
    "state/runs/a-b--20261201T0700Z/run.json": b"2",
    "state/runs/a--20261202T0700Z/run.json": b"",
    "state/schedules/a.json": b"c",
    "state/schedules/a-b.json": b"d",
    "state/health.json": b"1",
    "state/dlq.json": b"a file named like a folder: git sorts it before state/dlq/",
    "state/dlq/a--20261201T0700Z--t.json": b"e",
}
"""Files whose listing and ids both stores must give as git does."""

TREE_IDS = {
    "state": "75865bbb4c979e02a26f6ee0f9ce86d3200b41f2",
    "state/runs": "355492aa42f31a4008253d89503e624a2a74b27e",
    "state/runs/a--20261201T0700Z": "11b3b62cae4420cce4700a6fd80d227ea6546ca6",
    "state/runs/a--20261201T0700Z/tracks": "21ee77e615bf7bdd3aa1d84df5795a46c91376ea",
    "state/dlq": "44e9ae1f293e5573b737c96a325270c7a324b24b",
    "state/schedules": "8801460a797e2095503371247b2a5324c246505a",
}
"""The ids ``git write-tree`` gives the folders of :data:`TREE` (the git store's run
of the suite checks them against git itself)."""


class StoreContract:
    """The contract cases; subclasses provide the ``backend_factory`` fixture."""

    @pytest.fixture
    def backend(self, backend_factory: BackendFactory) -> Backend:
        return backend_factory()

    def test_a_new_store_is_empty(self, backend: Backend) -> None:
        snap = backend.store.read()
        assert snap.tip is None
        assert dict(snap.files) == {}

    def test_transact_writes_files_and_read_returns_them(self, backend: Backend) -> None:
        result = backend.store.transact(
            lambda _: {"state/runs/a--20261201T0700Z/run.json": b"{}\n", "state/health.json": b"1"},
            "first")
        assert result.landed and result.attempts == 1 and result.tip is not None
        assert result.changed == ("state/health.json", "state/runs/a--20261201T0700Z/run.json")
        snap = backend.store.read()
        assert snap.tip == result.tip
        assert dict(snap.files) == {"state/runs/a--20261201T0700Z/run.json": b"{}\n",
                                    "state/health.json": b"1"}
        assert "state/health.json" in snap.files and "state/nope" not in snap.files
        assert backend.commits() == 1

    @pytest.mark.parametrize("change", [None, {}, {"state/a": b"same"}, {"state/missing": None}],
                             ids=["none", "empty", "same-content", "delete-missing"])
    def test_a_change_that_changes_nothing_commits_nothing(self, backend: Backend,
                                                           change: Change | None) -> None:
        first = backend.store.transact(_put("state/a", b"same"), "seed")
        result = backend.store.transact(lambda _: change, "nothing")
        assert not result.landed and result.changed == ()
        assert result.tip == first.tip == backend.store.read().tip
        assert backend.commits() == 1

    def test_a_change_of_thousands_of_files_lands_whole(self, backend: Backend) -> None:
        """Bulk writes (an enqueue of 10,000 items) take another path in the git store:
        one pack for all their blobs. Every byte lands as given, empty and binary too."""
        change: Change = {f"state/q/{i % 7}/{i}.json": f"{i}\n".encode() * (i % 5)
                          for i in range(1500)}
        change["state/q/binary"] = bytes(range(256)) * 3
        result = backend.store.transact(lambda _: change, "bulk")
        assert result.landed and len(result.changed) == len(change)
        assert dict(backend.store.read().files) == change

    def test_none_deletes_a_file(self, backend: Backend) -> None:
        backend.store.transact(lambda _: {"state/a": b"1", "state/b/c": b"2"}, "seed")
        result = backend.store.transact(lambda _: {"state/b/c": None}, "delete")
        assert result.landed and result.changed == ("state/b/c",)
        assert dict(backend.store.read().files) == {"state/a": b"1"}

    def test_change_fn_sees_the_latest_tip(self, backend: Backend) -> None:
        def increment(snap: Snapshot) -> Change:
            n = int(snap.files.get("state/counter", b"0"))
            return {"state/counter": str(n + 1).encode()}

        tips = [backend.store.transact(increment, "inc").tip for _ in range(3)]
        assert len(set(tips)) == 3
        assert backend.store.read().files["state/counter"] == b"3"

    def test_a_stale_snapshot_passed_in_only_costs_a_retry(self, backend: Backend) -> None:
        stale = backend.store.read()
        backend.store.transact(_put("state/a", b"1"), "first")

        def increment(snap: Snapshot) -> Change:
            return {"state/a": str(int(snap.files.get("state/a", b"0")) + 1).encode()}

        result = backend.store.transact(increment, "inc", snapshot=stale)
        assert result.landed and result.attempts == 2
        assert backend.store.read().files["state/a"] == b"2"
        fresh = backend.store.read()
        assert backend.store.transact(increment, "inc", snapshot=fresh).attempts == 1
        assert backend.store.read().files["state/a"] == b"3"

    def test_an_exception_in_change_fn_propagates_and_writes_nothing(
            self, backend: Backend) -> None:
        def boom(_: Snapshot) -> Change:
            raise RuntimeError("boom")

        with pytest.raises(RuntimeError, match="boom"):
            backend.store.transact(boom, "boom")
        assert backend.store.read().tip is None and backend.commits() == 0

    @pytest.mark.parametrize("path", ["README.md", "state", "state/", "/state/a", "state/../a",
                                      "state//a", "state/./a", "state/a\\b", "state/.git/x"])
    def test_paths_outside_state_or_not_normalised_are_refused(
            self, backend: Backend, path: str) -> None:
        with pytest.raises(ValueError, match="invalid state path"):
            backend.store.transact(_put(path, b"x"), "bad")
        assert backend.commits() == 0

    def test_content_must_be_bytes(self, backend: Backend) -> None:
        with pytest.raises(TypeError, match="must be bytes"):
            backend.store.transact(lambda _: {"state/a": "text"}, "bad")  # type: ignore[dict-item]

    def test_a_lost_race_re_reads_and_re_applies(self, backend: Backend) -> None:
        backend.store.transact(_put("state/counter", b"10"), "seed")
        rival = backend.rival()
        seen: list[dict[str, bytes]] = []

        def change(snap: Snapshot) -> Change:
            seen.append(dict(snap.files))
            if len(seen) == 1:  # another writer lands between our read and our push
                rival.transact(lambda s: {"state/counter": b"20", "state/rival": b"r"}, "rival")
            return {"state/counter": str(int(snap.files["state/counter"]) + 1).encode()}

        result = backend.store.transact(change, "mine")
        assert result.landed and result.attempts == 2
        assert seen[0]["state/counter"] == b"10" and seen[1]["state/counter"] == b"20"
        files = backend.store.read().files
        assert files["state/counter"] == b"21" and files["state/rival"] == b"r"
        assert backend.commits() == 3

    def test_losing_every_race_gives_up_with_cas_exhausted(
            self, backend_factory: BackendFactory) -> None:
        backend = backend_factory(max_attempts=3)
        rival = backend.rival()
        calls = 0

        def change(snap: Snapshot) -> Change:
            nonlocal calls
            calls += 1
            rival.transact(_put("state/rival", str(calls).encode()), "rival")
            return {"state/mine": b"x"}

        with pytest.raises(CASExhausted):
            backend.store.transact(change, "mine")
        assert calls == 3
        assert "state/mine" not in backend.store.read().files

    def test_a_snapshot_does_not_change_after_later_writes(self, backend: Backend) -> None:
        backend.store.transact(_put("state/a", b"old"), "one")
        before = backend.store.read()
        backend.store.transact(lambda _: {"state/a": b"new", "state/b": b"b"}, "two")
        assert dict(before.files) == {"state/a": b"old"}
        assert backend.store.read().files["state/a"] == b"new"

    def test_threads_sharing_one_store_lose_no_update(self, backend: Backend) -> None:
        def increment(snap: Snapshot) -> Change:
            data = json.loads(snap.files.get("state/counter.json", b'{"n": 0}'))
            return {"state/counter.json": json.dumps({"n": data["n"] + 1}).encode()}

        threads = [threading.Thread(target=backend.store.transact, args=(increment, "inc"))
                   for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert json.loads(backend.store.read().files["state/counter.json"]) == {"n": 6}
        assert backend.commits() == 6

    # ------------------------------------------------------------ the files' questions

    def test_files_list_folders_without_reading_them_as_git_does(self, backend: Backend) -> None:
        backend.store.transact(lambda _: dict(TREE), "seed")
        files = backend.store.read().files
        # a folder listed with its subfolders still names them (git recurses into them)
        assert files.listdirs(["state", "state/runs/", "state/runs/a--20261201T0700Z",
                               "state/nope"]) == {
            "state": {"runs": True, "schedules": True, "health.json": False,
                      "dlq.json": False, "dlq": True},
            "state/runs": {"a--20261201T0700Z": True, "a-b--20261201T0700Z": True,
                           "a--20261202T0700Z": True},
            "state/runs/a--20261201T0700Z": {"run.json": False, "tracks": True},
            "state/nope": {},
        }
        assert files.listdirs([""]) == {"": {"state": True}}

    def test_the_folders_of_many_runs_list_as_those_of_a_few(self, backend: Backend) -> None:
        """A rebuilt index lists every run's folders at once (the git store then lists
        ``state/runs`` whole): each folder is listed exactly, a missing one empty."""
        runs = [f"r{n:03d}--20261201T0700Z" for n in range(100)]
        tree = {f"state/runs/{r}/run.json": r.encode() for r in runs}
        tree.update({f"state/runs/{r}/tracks/t.json": b"t" for r in runs[::2]})
        tree["state/queues/work/backlog/0001.jsonl"] = b"item"
        backend.store.transact(lambda _: dict(tree), "seed")
        files = backend.store.read().files
        folders = [f for r in runs for f in (f"state/runs/{r}", f"state/runs/{r}/tracks",
                                             f"state/runs/{r}/undo")]
        listed = files.listdirs(folders)
        assert listed == {
            **{f"state/runs/{r}": {"run.json": False, **({"tracks": True} if i % 2 == 0
                                                         else {})}
               for i, r in enumerate(runs)},
            **{f"state/runs/{r}/tracks": {"t.json": False} if i % 2 == 0 else {}
               for i, r in enumerate(runs)},
            **{f"state/runs/{r}/undo": {} for r in runs}}
        assert files[f"state/runs/{runs[7]}/run.json"] == runs[7].encode()
        assert files.listdirs(["state/queues/work"]) == {"state/queues/work": {"backlog": True}}
        assert files.listdirs(["state/runs"])["state/runs"] == dict.fromkeys(runs, True)

    def test_object_ids_are_gits_blob_and_tree_ids(self, backend: Backend) -> None:
        backend.store.transact(lambda _: dict(TREE), "seed")
        files = backend.store.read().files
        assert {path: files.object_id(path) for path in TREE} == {
            path: blob_id(data) for path, data in TREE.items()}
        assert {folder: files.object_id(folder) for folder in TREE_IDS} == TREE_IDS
        assert files.object_id("state/nope") is None
        assert files.object_id("state/runs/nope/run.json") is None

    def test_an_edit_deep_down_changes_the_id_of_every_folder_above(
            self, backend: Backend) -> None:
        backend.store.transact(lambda _: dict(TREE), "seed")
        backend.store.transact(_put("state/runs/a--20261201T0700Z/tracks/t.json", b"!"), "edit")
        files = backend.store.read().files
        changed = {f for f in TREE_IDS if files.object_id(f) != TREE_IDS[f]}
        assert changed == {"state", "state/runs", "state/runs/a--20261201T0700Z",
                           "state/runs/a--20261201T0700Z/tracks"}

    def test_prefetch_changes_no_read(self, backend: Backend) -> None:
        backend.store.transact(lambda _: dict(TREE), "seed")
        files = backend.store.read().files
        files.prefetch([*TREE, "state/nope", "state/runs/nope/run.json"])
        assert dict(files) == TREE and "state/nope" not in files

    def test_an_empty_branch_lists_nothing_and_names_no_id(self, backend: Backend) -> None:
        files = backend.store.read().files
        files.prefetch(["state/a"])
        assert files.listdirs(["", "state"]) == {"": {}, "state": {}}
        assert files.object_id("state") is None

    def test_a_stamp_names_its_folders_tree_in_the_same_commit(self, backend: Backend) -> None:
        def fill(tree: str | None) -> bytes:
            return f"{tree}".encode()

        backend.store.transact(lambda _: {**TREE, "state/open.json": Stamped.of(
            "state/runs", fill), "state/gone.json": Stamped.of("state/gone", fill)}, "seed")
        files = backend.store.read().files
        assert files["state/open.json"] == TREE_IDS["state/runs"].encode()
        assert files["state/gone.json"] == b"None"  # no such folder in the commit
        assert files.object_id("state/runs") == TREE_IDS["state/runs"]
        assert files.object_id("state/open.json") == blob_id(TREE_IDS["state/runs"].encode())
