"""The chains among schedules as the pull request's comment lists them: upstream
first, a diamond as two paths, a loop never walked twice, a long list bounded."""

from __future__ import annotations

from orchestrator.config.chains import chain_paths


def test_each_path_runs_from_a_schedule_after_none_to_one_none_fires_after() -> None:
    edges = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"], "lone": [], "x": ["gone"],
             "y": ["x"]}
    assert chain_paths(edges) == ([["a", "b", "d"], ["a", "c", "d"], ["x", "y"]], False)


def test_a_loop_ends_a_path_and_a_long_list_is_cut_with_a_note() -> None:
    assert chain_paths({"a": [], "b": ["a", "c"], "c": ["b"]}) == ([["a", "b", "c"]], False)
    fan = {"root": [], **{f"s{n:03d}": ["root"] for n in range(60)}}
    paths, more = chain_paths(fan, 50)
    assert len(paths) == 50 and more and paths[0] == ["root", "s000"]


def test_a_chain_longer_than_the_recursion_limit_is_one_path() -> None:
    edges = {"s0": [], **{f"s{n}": [f"s{n - 1}"] for n in range(1, 5000)}}
    [path], more = chain_paths(edges)
    assert len(path) == 5000 and not more
