"""Leg job names: never over 100 characters, matched by a hash of the dispatch key.

GitHub cuts job and check-run names longer than 100 characters in its REST API to 97
characters and ``...``. It does not document this; projects report it (for example
kata-containers/kata-containers #11176, OP5dev/TF-via-PR #482, google/mono_repo.dart
#535). A dispatch key (``<run_id>--<track>--<attempt>``, with ``.poll`` and ``undo--``)
reaches 150 characters with long ids, so a leg's job is named :func:`job_name`: the key
without its run id (the workflow run's title carries that), cut to fit, then a space
and :data:`HASH_CHARS` hex digits of the key's SHA-256. Jobs are matched by that hash.

Jobs named after the whole key (a ``track.yml`` from before, or a schedule's own
workflow naming jobs ``${{ matrix.leg.key }}``) still match: by the key itself, or by
GitHub's cut form of it (:func:`as_listed`) while no other wanted key shares it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from typing import Any

MAX_CHARS = 100
"""GitHub lists longer job names cut (undocumented; see the module's docstring)."""
HASH_CHARS = 10
_HASHED = re.compile(rf" ([0-9a-f]{{{HASH_CHARS}}})$")


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:HASH_CHARS]


def job_name(key: str) -> str:
    """The job name of the leg with dispatch ``key``: at most :data:`MAX_CHARS`, e.g.
    ``ingest--1 3f2a9c1d0e`` for ``nightly--20261201T0700Z--ingest--1``."""
    parts = key.split("--", 2)  # <schedule>--<slot>--<the rest>
    readable = parts[2] if len(parts) == 3 else key
    return f"{readable[:MAX_CHARS - HASH_CHARS - 1]} {key_hash(key)}"


def as_listed(name: str) -> str:
    """``name`` as GitHub's REST API lists it: cut to 97 characters and ``...``."""
    return name if len(name) <= MAX_CHARS else name[:MAX_CHARS - 3] + "..."


def is_leg(name: str) -> bool:
    """Whether a job of a track workflow is a matrix leg (not ``fan-in``): named by
    :func:`job_name`, or after a whole dispatch key."""
    return bool(_HASHED.search(name)) or "--" in name


def match(jobs: Iterable[Mapping[str, Any]], keys: Iterable[str]) -> dict[str, Mapping[str, Any]]:
    """Dispatch key -> its job among ``jobs`` (the newest, by id, when a name repeats)."""
    wanted = list(dict.fromkeys(keys))
    by_hash = {key_hash(k): k for k in wanted}
    exact = {k: k for k in wanted}
    cut: dict[str, list[str]] = {}
    for each in wanted:
        cut.setdefault(as_listed(each), []).append(each)
    found: dict[str, Mapping[str, Any]] = {}
    for job in sorted(jobs, key=_job_id):
        name = str(job.get("name"))
        hashed = _HASHED.search(name)
        key = (by_hash.get(hashed.group(1)) if hashed else None) or exact.get(name)
        if key is None and len(cut.get(name, ())) == 1 and name.endswith("..."):
            key = cut[name][0]
        if key is not None:
            found[key] = job
    return found


def _job_id(job: Mapping[str, Any]) -> int:
    value = job.get("id")
    return value if isinstance(value, int) else 0
