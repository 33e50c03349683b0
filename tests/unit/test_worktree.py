"""Reading git's listing of the schedule folder (``orchestrator.tick.worktree.parse``): what
git may print for a folder that is not exactly its index vouches for nothing, and no
name, however odd, is misread."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from orchestrator.tick.worktree import parse

A = "a" * 40
B = "b" * 40


def entry(name: bytes, tag: bytes = b"H", mode: bytes = b"100644", blob: str = A,
          stage: bytes = b"0") -> bytes:
    return tag + b" " + mode + b" " + blob.encode() + b" " + stage + b"\t" + name + b"\0"


def test_names_with_tabs_newlines_and_bytes_that_are_not_utf8_are_read_as_they_are(
        ) -> None:
    listing = (entry(b"daily.json") + entry(b"odd\tname.json", blob=B)
               + entry(b"line\nbreak.json") + entry(b"\xff.json")
               + entry(b"sub/inner.json") + entry(b"schedule.schema.json"))
    clean = parse(listing)
    assert clean is not None
    assert clean.names == {"daily.json", "odd\tname.json", "line\nbreak.json",
                           "\udcff.json", "sub", "schedule.schema.json"}
    assert clean.blobs["odd\tname.json"] == B and "sub/inner.json" not in clean.blobs
    assert clean.stems(".json") == {"daily", "odd\tname", "line\nbreak", "\udcff",
                                    "schedule.schema"}
    more = parse(listing + entry(b"x.json"))
    assert more is not None and more.digest != clean.digest


@pytest.mark.parametrize("bad", [
    entry(b"daily.json", tag=b"C"),             # modified (-m lists it again)
    entry(b"daily.json", tag=b"R"),             # deleted
    entry(b"daily.json", tag=b"h"),             # assume-unchanged
    entry(b"daily.json", tag=b"S"),             # skip-worktree
    entry(b"daily.json", tag=b"M", stage=b"2"),  # in conflict
    entry(b"daily.json", mode=b"120000"),       # a symlink
    entry(b"lib", mode=b"160000"),              # a submodule
    b"H 100644 " + A.encode() + b" 0\tdaily.json",  # cut short
    b"garbage\0",
])
def test_anything_but_a_plain_file_the_index_holds_vouches_for_nothing(bad: bytes) -> None:
    assert parse(entry(b"other.json") + bad) is None


@settings(max_examples=300, deadline=timedelta(seconds=3))
@given(st.binary(max_size=400))
def test_any_bytes_are_either_refused_or_read_without_an_error(data: bytes) -> None:
    clean = parse(data)
    if clean is not None:
        assert all("/" not in name for name in clean.names)
        assert set(clean.blobs) <= clean.names
        _ = clean.digest, clean.stems(".json")
