"""A queue's items behind a link, against real git: what a runner's fetch brings,
the items' ref that moves with the branch, old branches, single-branch mode, rewinds."""

from __future__ import annotations

from pathlib import Path

from orchestrator.store import Change, GitStateStore, Snapshot
from tests.gitrepo import empty_clone, git

BRANCH = "orchestrator-state"
ITEMS = "state/queues/q/items"
REF = f"refs/orchestrator/items/{BRANCH}/q"


def _store(repo: Path, origin: Path | str, branch: str = BRANCH) -> GitStateStore:
    return GitStateStore(repo, str(origin), branch, sleep=lambda _: None)


def _items(names: list[str], tag: str = "") -> Change:
    return {f"{ITEMS}/{n[:2]}/{n[2]}/{n}.json": f"{n}{tag}".encode() for n in names}


def _ids(count: int) -> list[str]:
    return [f"{n:03x}{n:05d}" for n in range(count)]


def _trees(repo: Path) -> set[str]:
    """The ids of every tree in ``repo``'s object store."""
    out = git("cat-file", "--batch-all-objects", "--batch-check=%(objecttype) %(objectname)",
              cwd=repo)
    return {line.split()[1] for line in out.splitlines() if line.startswith("tree ")}


def _entry(origin: Path, path: str) -> tuple[str, str]:
    """``(mode, id)`` of ``path`` on the state branch of ``origin``: for a link, the id
    of the commit it names."""
    meta = git("ls-tree", "--full-tree", BRANCH, "--", path, cwd=origin).split("\t")[0]
    mode, _kind, sha = meta.split()
    return mode, git("cat-file", "blob", sha, cwd=origin) if mode == "120000" else sha


def test_a_fresh_partial_runner_fetches_no_item_tree_until_it_reads_an_item(
        tmp_path: Path, origin: Path) -> None:
    git("config", "uploadpack.allowFilter", "true", cwd=origin)
    seed = empty_clone(tmp_path / "seed")
    git("commit", "--quiet", "--allow-empty", "-m", "main", cwd=seed)
    git("push", "--quiet", str(origin), "HEAD:main", cwd=seed)
    names = _ids(300)
    _store(empty_clone(tmp_path / "writer"), origin).transact(
        lambda _: {**_items(names), "state/queues/q.json": b"{}"}, "enqueue")
    runner = tmp_path / "runner"
    git("clone", "--quiet", "--depth=1", f"file://{origin}", str(runner))

    files = _store(runner, origin.as_uri()).read().files  # git's promisor needs a URL
    assert files.listdirs(["state/queues/q"]) == {"state/queues/q": {"items": True}}
    assert files["state/queues/q.json"] == b"{}"
    before = _trees(runner)
    assert sorted(files) == sorted(["state/queues/q.json", *_items(names)])
    assert all(files[path] == data for path, data in _items(names).items())
    shards = sorted({path.rpartition("/")[0] for path in _items(names)})
    listed = _store(runner, origin.as_uri()).read().files.listdirs(shards)  # one listing
    assert sum(len(entries) for entries in listed.values()) == len(names)

    # The items' trees (a folder of shards, 300 leaves) came with the first item read.
    assert len(_trees(runner) - before) > 300


def test_the_items_commit_is_kept_by_a_ref_that_moves_with_the_branch(
        tmp_path: Path, origin: Path) -> None:
    store = _store(empty_clone(tmp_path / "a"), origin)
    store.transact(lambda _: _items(_ids(3)), "one")
    mode, first = _entry(origin, ITEMS)
    assert (mode, git("rev-parse", REF, cwd=origin)) == ("120000", first)

    other = _store(empty_clone(tmp_path / "b"), origin)
    other.transact(lambda _: {**_items(["abc00001"], "!"), "state/x": b"1"}, "two")
    mode, second = _entry(origin, ITEMS)
    assert git("rev-parse", REF, cwd=origin) == second
    assert git("rev-parse", f"{second}^", cwd=origin) == first  # a fast-forward

    other.transact(lambda _: {"state/x": b"2"}, "no item written")
    assert (_entry(origin, ITEMS)[1], git("rev-parse", REF, cwd=origin)) == (second, second)
    files = store.read().files
    assert files["state/queues/q/items/ab/c/abc00001.json"] == b"abc00001!"
    assert sorted(files) == sorted(["state/x", *_items([*_ids(3), "abc00001"])])


def test_racing_writers_of_items_lose_no_item(tmp_path: Path, origin: Path) -> None:
    mine = _store(empty_clone(tmp_path / "a"), origin)
    theirs = _store(empty_clone(tmp_path / "b"), origin)
    mine.transact(lambda _: _items(["00000001"]), "first")
    stale = mine.read()
    theirs.transact(lambda _: _items(["00100002"]), "theirs")

    result = mine.transact(lambda _: _items(["00200003"]), "mine", snapshot=stale)

    assert result.attempts == 2  # the stale snapshot lost the race, and the change was re-applied
    assert sorted(theirs.read().files) == sorted(_items(["00000001", "00100002", "00200003"]))
    assert git("rev-parse", REF, cwd=origin) == _entry(origin, ITEMS)[1]


def test_a_branch_with_items_as_plain_trees_moves_them_behind_a_link_when_it_writes_one(
        tmp_path: Path, origin: Path) -> None:
    old = empty_clone(tmp_path / "old")
    for path, data in {**_items(_ids(4)), "state/queues/q.json": b"{}"}.items():
        (old / path).parent.mkdir(parents=True, exist_ok=True)
        (old / path).write_bytes(data)
    git("add", ".", cwd=old)
    git("commit", "--quiet", "-m", "items as plain trees", cwd=old)
    git("push", "--quiet", str(origin), f"HEAD:{BRANCH}", cwd=old)
    store = _store(empty_clone(tmp_path / "a"), origin)
    blob = git("rev-parse", f"{BRANCH}:{ITEMS}/00/0/00000000.json", cwd=origin)

    assert store.read().files[f"{ITEMS}/00/1/00100001.json"] == b"00100001"
    store.transact(lambda _: {"state/queues/q.json": b"{ }"}, "no item written")
    assert _entry(origin, ITEMS)[0] == "040000"

    store.transact(lambda _: _items(["ff000009"]), "one item")
    assert _entry(origin, ITEMS)[0] == "120000"
    files = store.read().files
    assert sorted(files) == sorted(["state/queues/q.json", *_items([*_ids(4), "ff000009"])])
    assert files.object_id(f"{ITEMS}/00/0/00000000.json") == blob

    git("push", "--quiet", "--force", str(origin), f"HEAD:{BRANCH}", cwd=old)  # plain again
    assert store.accept_rewind() is not None
    store.transact(lambda snap: {p: None for p in snap.files if p.startswith(ITEMS)},
                   "every item of a plain folder deleted")
    assert git("ls-tree", "-r", "--name-only", BRANCH, cwd=origin) == "state/queues/q.json"


def test_the_project_branch_keeps_its_items_as_plain_trees(tmp_path: Path, origin: Path) -> None:
    checkout = empty_clone(tmp_path / "checkout")
    (checkout / "README.md").write_text("project\n")
    git("add", ".", cwd=checkout)
    git("commit", "--quiet", "-m", "project", cwd=checkout)
    git("push", "--quiet", str(origin), "HEAD:main", cwd=checkout)

    _store(checkout, origin, "main").transact(lambda _: _items(_ids(2)), "items")

    meta = git("ls-tree", "--full-tree", "main", "--", ITEMS, cwd=origin)
    assert meta.startswith("040000 tree")  # a checkout of main sees no submodule
    assert git("for-each-ref", "refs/orchestrator/items", cwd=origin) == ""


def test_after_an_accepted_rewind_the_items_ref_follows_the_branch_back(
        tmp_path: Path, origin: Path) -> None:
    store = _store(empty_clone(tmp_path / "a"), origin)
    store.transact(lambda _: _items(["00000001"]), "one")
    back, link = git("rev-parse", BRANCH, cwd=origin), _entry(origin, ITEMS)[1]
    store.transact(lambda _: _items(["00100002"]), "two")
    git("update-ref", f"refs/heads/{BRANCH}", back, cwd=origin)  # a restored backup
    assert store.accept_rewind() is not None

    result = store.transact(lambda _: _items(["00200003"]), "three")

    assert result.landed
    now = _entry(origin, ITEMS)[1]
    assert git("rev-parse", REF, cwd=origin) == now
    assert git("rev-parse", f"{now}^", cwd=origin) == link
    assert sorted(store.read().files) == sorted(_items(["00000001", "00200003"]))


def test_a_queue_left_without_items_has_no_link(tmp_path: Path, origin: Path) -> None:
    store = _store(empty_clone(tmp_path / "a"), origin)
    store.transact(lambda _: {**_items(_ids(2)), "state/queues/q.json": b"{}"}, "two items")

    def drop(snap: Snapshot) -> Change:
        return {path: None for path in snap.files if path.startswith(ITEMS)}

    store.transact(drop, "no item left")

    assert git("ls-tree", "-r", "--name-only", BRANCH, cwd=origin) == "state/queues/q.json"
    assert store.read().files.listdirs(["state/queues"]) == {
        "state/queues": {"q.json": False}}


def test_a_checkout_of_the_state_branch_passes_what_actions_checkout_runs_on_it(
        tmp_path: Path, origin: Path) -> None:
    _store(empty_clone(tmp_path / "a"), origin).transact(lambda _: _items(_ids(2)), "items")
    checkout = tmp_path / "checkout"
    git("clone", "--quiet", "--depth=1", "--branch", BRANCH, origin.as_uri(), str(checkout))

    # actions/checkout runs this when it removes its credentials; a gitlink with no
    # .gitmodules would make it fail ("no submodule mapping found").
    git("submodule", "foreach", "--recursive", "true", cwd=checkout)
    assert (checkout / ITEMS).is_symlink()


def test_a_link_naming_no_commit_reads_as_an_empty_folder(tmp_path: Path, origin: Path) -> None:
    store = _store(empty_clone(tmp_path / "a"), origin)
    store.transact(lambda _: {**_items(_ids(2)), "state/queues/q.json": b"{}"}, "items")
    edit = tmp_path / "edit"
    git("clone", "--quiet", "--branch", BRANCH, str(origin), str(edit))
    (edit / ITEMS).unlink()
    (edit / ITEMS).symlink_to("nowhere")
    git("commit", "--quiet", "-am", "a hand edit", cwd=edit)
    git("push", "--quiet", "origin", BRANCH, cwd=edit)

    files = store.read().files

    assert sorted(files) == ["state/queues/q.json"]
    assert files.listdirs([ITEMS, f"{ITEMS}/00"]) == {ITEMS: {}, f"{ITEMS}/00": {}}
    store.transact(lambda _: _items(["ff000009"]), "an item written anew")
    assert sorted(store.read().files) == sorted(["state/queues/q.json", *_items(["ff000009"])])


def test_a_fresh_partial_runner_writes_items_fetching_only_what_it_reads(
        tmp_path: Path, origin: Path) -> None:
    git("config", "uploadpack.allowFilter", "true", cwd=origin)
    seed = empty_clone(tmp_path / "seed")
    git("commit", "--quiet", "--allow-empty", "-m", "main", cwd=seed)
    git("push", "--quiet", str(origin), "HEAD:main", cwd=seed)
    writer = _store(empty_clone(tmp_path / "writer"), origin)
    writer.transact(lambda _: _items(_ids(500)), "enqueue")
    runner = tmp_path / "runner"
    git("clone", "--quiet", "--depth=1", f"file://{origin}", str(runner))
    store = _store(runner, origin.as_uri())
    stale = store.read()
    writer.transact(lambda _: _items(["00000000"], "!"), "a rival lands first")

    result = store.transact(lambda snap: {**_items(["00100001"], "?"), **_items(["ff000009"])},
                            "settle one, add one", snapshot=stale)

    assert result.attempts == 2
    blobs = git("cat-file", "--batch-all-objects", "--batch-check=%(objecttype)", cwd=runner)
    assert blobs.split().count("blob") < 10  # none of the 500 items' blobs came
    files = writer.read().files
    assert len(files) == 501
    assert [files[f"{ITEMS}/{p}"] for p in ("00/0/00000000.json", "00/1/00100001.json")] == [
        b"00000000!", b"00100001?"]
