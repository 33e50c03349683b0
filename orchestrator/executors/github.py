"""The GitHub Actions executor: one ``workflow_dispatch`` run per run, one matrix leg per track.

Dispatch
    ``POST /repos/{o}/{r}/actions/workflows/{workflow}/dispatches`` with the inputs
    ``run_id``, ``batch`` and ``tracks`` (a JSON list of matrix legs) and
    ``return_run_details: true``, which makes GitHub answer ``200`` with the new run's
    id. A ``204`` without details (older API behaviour) and GitHub Enterprise Server
    rejecting the parameter (``422``) are both handled: the run is then found by its
    ``run-name``. GitHub caps a matrix at 256 legs and the inputs at 65,535
    characters, so the requests of one run are split into several *batches*, each
    dispatched as its own workflow run.

Correlation
    The track workflow sets ``run-name: <run_id> <batch>``, where ``batch`` is a short
    hash of the batch's dispatch keys. The REST API returns the run-name as a workflow
    run's ``display_title`` (it never returns a run's inputs), so a batch is found
    again by listing ``workflow_dispatch`` runs created since the dispatch and
    comparing titles. Every matrix leg's job is named after its dispatch key
    (``<run_id>--<track>--<attempt>``), so the jobs of a run tell exactly which keys it
    carries. Before a dispatch is retried, the batch is looked up first: a dispatch
    whose response was lost is adopted, never repeated.

Observation
    ``GET /actions/runs/{id}/jobs?filter=latest`` (paginated), one listing per workflow
    run whatever its number of tracks. Queued and in-progress jobs are ``running``;
    ``success`` is ``complete``, ``failure`` ``failed``, ``cancelled`` ``cancelled`` and
    ``timed_out`` ``tapped_out``.

Limits and failures
    ``Retry-After``, ``x-ratelimit-remaining``/``x-ratelimit-reset`` and secondary
    rate limits (``403``/``429``) are waited out within a bounded budget of seconds
    per tick. Server errors and network failures are retried with exponential
    backoff and counted by a circuit breaker (closed, open, half-open) that the tick
    persists in ``state/health.json``; while it is open and its cooldown has not
    passed, no HTTP request is made at all.

The token is sent only in the ``Authorization`` header; it never appears in a
message, a log line or ``repr``.
"""

from __future__ import annotations

import dataclasses
import email.utils
import hashlib
import json
import logging
import math
import os
import re
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from .. import __version__
from ..errors import CircuitOpen, ExecutorError, UserError
from ..models import WORKFLOW_RE, Breaker, TrackPhase, check_id, check_run_id
from ..times import iso, parse_utc
from .base import DispatchRequest, DispatchResult, Handle, Observation

log = logging.getLogger(__name__)

DEFAULT_API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
"""Pinned REST API version. ``return_run_details`` is an additive parameter, available in
every supported version; GitHub Enterprise Server supports this version too."""
MAX_LEGS = 256
"""GitHub runs at most 256 jobs from one matrix."""
MAX_INPUTS_CHARS = 65_535
"""GitHub rejects ``workflow_dispatch`` inputs longer than this, all inputs together."""
LOST_AFTER = timedelta(minutes=10)
"""A dispatch whose answer was lost and whose run-name no run carries after this long
created nothing (GitHub lists a new run within seconds): its attempt is failed, and
the tick's retry policy takes over, under a new dispatch key."""
CLOCK_SKEW = timedelta(minutes=5)
"""Margin for the ``created`` filter: runner and GitHub clocks differ slightly."""
RUN_PAGES = 10
"""Pages of 100 workflow runs searched when correlating by run-name."""

RESEND_LOOKUP_AFTER = timedelta(minutes=10)
"""A batch dispatched this long after its slot is first looked up by run-name."""
SECONDARY_WAIT = 60.0
"""GitHub asks to wait at least a minute after a secondary rate limit without
``Retry-After``."""

_REPO_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,38}/(?!\.\.?$)[A-Za-z0-9_.-]{1,100}")
"""``owner/name`` as GitHub allows them; it becomes part of every request path."""
_RUNNING = frozenset({"queued", "in_progress", "waiting", "pending", "requested"})
_CONCLUSION: Mapping[str, TrackPhase] = {
    "success": TrackPhase.COMPLETE,
    "neutral": TrackPhase.COMPLETE,
    "failure": TrackPhase.FAILED,
    "cancelled": TrackPhase.CANCELLED,
    "skipped": TrackPhase.CANCELLED,
    "timed_out": TrackPhase.TAPPED_OUT,
}
"""Job conclusions; anything else (``action_required``, ``startup_failure``, ...) fails."""


class GitHubError(ExecutorError):
    """The GitHub API call failed."""

    def __init__(self, message: str, *, status: int | None = None, ambiguous: bool = False,
                 rate_limited: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.ambiguous = ambiguous
        """No answer arrived: the request may or may not have taken effect."""
        self.rate_limited = rate_limited


# --------------------------------------------------------------------------- breaker


@dataclass(frozen=True)
class BreakerPolicy:
    """When the circuit opens and how long it stays open."""

    threshold: int = 5
    """Consecutive failed calls (server errors, network errors, exhausted rate limits)."""
    cooldown: timedelta = timedelta(minutes=15)
    """Time after opening before one probing call is let through (``half_open``)."""


def breaker_now(breaker: Breaker, now: datetime, policy: BreakerPolicy) -> Breaker:
    """``breaker`` as it stands at ``now``: an open breaker past its cooldown is half-open."""
    if (breaker.state == "open" and breaker.opened_at is not None
            and now >= breaker.opened_at + policy.cooldown):
        return breaker.model_copy(update={"state": "half_open"})
    return breaker


def breaker_success(breaker: Breaker) -> Breaker:
    if breaker.state == "closed" and breaker.failures == 0:
        return breaker
    return Breaker(last_error=breaker.last_error)


def breaker_failure(breaker: Breaker, now: datetime, error: str,
                    policy: BreakerPolicy) -> Breaker:
    """Count one failure; a half-open breaker reopens at once, a closed one at the threshold."""
    failures = breaker.failures + 1
    if breaker.state == "half_open" or failures >= policy.threshold:
        return Breaker(state="open", failures=failures, opened_at=now, last_error=error)
    return Breaker(state="closed", failures=failures, opened_at=None, last_error=error)


def breaker_allows(breaker: Breaker, now: datetime, policy: BreakerPolicy) -> bool:
    return breaker_now(breaker, now, policy).state != "open"


# --------------------------------------------------------------------------- batches


def _leg(request: DispatchRequest) -> dict[str, Any]:
    """One matrix leg: everything ``track.yml`` needs to run the track."""
    return {
        "key": request.key,
        "track": request.track,
        "attempt": request.attempt,
        "run": request.spec.run or "",
        "timeout_minutes": max(1, math.ceil(request.spec.timeout_minutes)),
        "inputs": dict(sorted(request.spec.inputs.items())),
    }


def _compact(data: Any) -> str:
    return json.dumps(data, separators=(",", ":"), sort_keys=True)


def batch_digest(keys: Iterable[str]) -> str:
    return hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Batch:
    """The requests of one run that go into one ``workflow_dispatch`` run."""

    run_id: str
    workflow: str
    requests: tuple[DispatchRequest, ...]

    @property
    def keys(self) -> list[str]:
        return [r.key for r in self.requests]

    @property
    def digest(self) -> str:
        return batch_digest(self.keys)

    @property
    def run_name(self) -> str:
        """The workflow run's ``run-name`` (``display_title``): ``<run_id> <digest>``."""
        return f"{self.run_id} {self.digest}"

    def inputs(self) -> dict[str, str]:
        return {
            "run_id": self.run_id,
            "batch": self.digest,
            "tracks": _compact([_leg(r) for r in self.requests]),
        }


def _escaped_len(text: str) -> int:
    """Characters ``text`` takes inside a JSON string (quotes excluded)."""
    return len(json.dumps(text)) - 2


def plan_batches(requests: Iterable[DispatchRequest], *, max_legs: int = MAX_LEGS,
                 max_chars: int = MAX_INPUTS_CHARS) -> tuple[list[Batch], list[DispatchResult]]:
    """Split requests into batches per run and workflow, at most ``max_legs`` legs and
    ``max_chars`` characters of JSON-encoded inputs each.

    Deterministic: the same requests always give the same batches (sorted by track
    and attempt), so a batch's ``run-name`` can be recomputed by a later tick. A
    request too large to fit even alone comes back as an error result.
    """
    groups: dict[tuple[str, str], list[DispatchRequest]] = {}
    for request in requests:
        groups.setdefault((request.run_id, request.workflow), []).append(request)
    batches: list[Batch] = []
    rejected: list[DispatchResult] = []
    for (run_id, workflow), group in sorted(groups.items()):
        group.sort(key=lambda r: (r.track, r.attempt))
        # Size of {"run_id": ..., "batch": ..., "tracks": "[...]"} with an empty list;
        # each leg adds its escaped JSON plus one comma. Escaping is per character, so
        # the lengths add up exactly.
        base = len(json.dumps({"run_id": run_id, "batch": "0" * 12, "tracks": "[]"}))
        current: list[DispatchRequest] = []
        size = base
        for request in group:
            cost = _escaped_len(_compact(_leg(request)))
            extra = cost + (1 if current else 0)
            if base + cost > max_chars:
                rejected.append(DispatchResult(
                    key=request.key,
                    error=f"track {request.track}: its matrix leg takes {base + cost} "
                          f"characters of workflow inputs; GitHub allows {max_chars}",
                ))
                continue
            if current and (len(current) >= max_legs or size + extra > max_chars):
                batches.append(Batch(run_id, workflow, tuple(current)))
                current, size, extra = [], base, cost
            current.append(request)
            size += extra
        if current:
            batches.append(Batch(run_id, workflow, tuple(current)))
    return batches, rejected


# --------------------------------------------------------------------------- executor


def _slot_of(run_id: str) -> datetime:
    stamp = check_run_id(run_id).rsplit("--", 1)[1]
    return datetime.strptime(stamp, "%Y%m%dT%H%MZ").replace(tzinfo=UTC)


def _message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text[:200].strip()
    if isinstance(data, dict):
        return str(data.get("message", ""))[:200]
    return ""


class GitHubExecutor:
    """Runs tracks as matrix legs of ``workflow_dispatch`` runs on GitHub Actions.

    ``now`` is the tick's time; the executor advances it by the seconds it sleeps and
    never reads the clock itself, so breaker and rate-limit decisions are
    reproducible. ``max_wait_seconds`` bounds all sleeping (backoff and rate limits)
    of one executor, that is of one tick.
    """

    name = "github"

    def __init__(
        self,
        repository: str,
        token: str,
        *,
        api_url: str = DEFAULT_API_URL,
        ref: str = "main",
        breaker: Breaker | None = None,
        now: datetime,
        sleep: Callable[[float], None] = time.sleep,
        max_wait_seconds: float = 120.0,
        client: httpx.Client | None = None,
        policy: BreakerPolicy | None = None,
        timeout: float = 20.0,
        max_attempts: int = 3,
        api_version: str = API_VERSION,
        correlate_polls: int = 4,
    ) -> None:
        if not _REPO_RE.fullmatch(repository or ""):
            raise UserError(f"invalid GitHub repository {repository!r}: expected owner/name")
        if not token:
            raise UserError("no GitHub token: set GITHUB_TOKEN (or pass a token)")
        if now.tzinfo is None:
            raise ValueError("now must be timezone-aware")
        self.repository = repository
        self.api_url = api_url.rstrip("/")
        self.ref = ref
        self.policy = policy or BreakerPolicy()
        self.max_attempts = max(1, max_attempts)
        self.correlate_polls = max(1, correlate_polls)
        self._token = token
        self._start = now.astimezone(UTC)
        self._slept = 0.0
        self._budget = max(0.0, max_wait_seconds)
        self._sleep = sleep
        self._breaker = breaker_now(breaker or Breaker(), self._start, self.policy)
        self._limited_until: datetime | None = None
        self._details = True
        self._cancel_marked: dict[int, set[str]] = {}
        self._headers = {
            "Accept": "application/vnd.github+json",
            "Authorization": f"Bearer {token}",
            "X-GitHub-Api-Version": api_version,
            "User-Agent": f"orchestrator/{__version__}",
        }
        self._own_client = client is None
        self._client = client or httpx.Client(base_url=self.api_url + "/", timeout=timeout)
        if self._own_client:
            # The Executor protocol has no close(): release the connections when the
            # executor goes away (a tick builds one and drops it).
            weakref.finalize(self, self._client.close)
        self.calls = 0
        """HTTP requests sent by this executor (for the tick's log and tests)."""

    def __repr__(self) -> str:
        return f"GitHubExecutor({self.repository!r}, api_url={self.api_url!r}, ref={self.ref!r})"

    @classmethod
    def from_env(cls, *, token: str | None = None, breaker: Breaker | None = None,
                 now: datetime, environ: Mapping[str, str] | None = None,
                 **options: Any) -> GitHubExecutor:
        """Build from the variables GitHub Actions sets: ``GITHUB_REPOSITORY``,
        ``GITHUB_TOKEN``, ``GITHUB_API_URL`` (GitHub Enterprise Server) and
        ``GITHUB_REF_NAME`` (the ref the track workflow is dispatched on;
        ``ORCHESTRATOR_DISPATCH_REF`` overrides it)."""
        env = os.environ if environ is None else environ
        repository = env.get("GITHUB_REPOSITORY", "")
        if not repository:
            raise UserError("GITHUB_REPOSITORY is not set: run the tick on GitHub Actions "
                            "or set it to owner/name")
        token = token or env.get("GITHUB_TOKEN") or env.get("GH_TOKEN") or ""
        if not token:
            raise UserError("GITHUB_TOKEN is not set: pass the workflow's token to the tick "
                            "step (env: GITHUB_TOKEN: ${{ github.token }})")
        return cls(
            repository,
            token,
            api_url=env.get("GITHUB_API_URL") or DEFAULT_API_URL,
            ref=env.get("ORCHESTRATOR_DISPATCH_REF") or env.get("GITHUB_REF_NAME") or "main",
            breaker=breaker,
            now=now,
            **options,
        )

    def close(self) -> None:
        if self._own_client:
            self._client.close()

    def __enter__(self) -> GitHubExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ protocol

    def health(self) -> Breaker:
        return self._breaker

    @property
    def available(self) -> bool:
        """False while the breaker is open: no call would be made."""
        return breaker_allows(self._breaker, self._now(), self.policy)

    def dispatch(self, requests: list[DispatchRequest]) -> list[DispatchResult]:
        for request in requests:
            check_run_id(request.run_id)
            check_id(request.track, "track name")
            self._workflow(request.workflow)
        batches, rejected = plan_batches(requests)
        results = {r.key: r for r in rejected}
        for batch in batches:
            try:
                outcome = self._dispatch_batch(batch)
            except CircuitOpen as exc:
                outcome = [DispatchResult(key=key, error=exc.message, not_sent=True)
                           for key in batch.keys]
            except ExecutorError as exc:
                outcome = [DispatchResult(key=key, error=exc.message) for key in batch.keys]
            results.update((r.key, r) for r in outcome)
        return [results[r.key] for r in requests]

    def lookup(self, requests: list[DispatchRequest]) -> dict[str, DispatchResult | None]:
        found: dict[str, DispatchResult | None] = {}
        groups: dict[tuple[str, str], list[DispatchRequest]] = {}
        for request in requests:
            groups.setdefault((request.run_id, self._workflow(request.workflow)),
                              []).append(request)
        for (run_id, workflow), group in sorted(groups.items()):
            try:
                hits = self._lookup_group(run_id, workflow, group)
                # asked and answered: what is not among the hits does not exist
                found.update({r.key: hits.get(r.key) for r in group})
            except CircuitOpen:
                break
            except ExecutorError as exc:
                log.warning("lookup of %s failed: %s", run_id, exc.message)
        return found

    def observe(self, handles: list[Handle]) -> dict[str, Observation]:
        out: dict[str, Observation] = {}
        by_run: dict[int, list[Handle]] = {}
        urls: dict[int, str | None] = {}
        pending: dict[tuple[str, str], list[Handle]] = {}
        for handle in handles:
            ci_run = handle.handle.get("ci_run_id")
            if isinstance(ci_run, int):
                by_run.setdefault(ci_run, []).append(handle)
            elif handle.handle.get("run_name"):
                wf = self._workflow(str(handle.handle.get("workflow", "track.yml")))
                pending.setdefault((wf, str(handle.handle["run_name"])), []).append(handle)
        try:
            for (workflow, run_name), group in sorted(pending.items()):
                try:
                    run = self._find_run(workflow, run_name, self._since_of(run_name))
                except CircuitOpen:
                    raise
                except ExecutorError as exc:
                    log.warning("looking up %s failed: %s", run_name, exc.message)
                    continue
                if run is not None:
                    by_run.setdefault(int(run["id"]), []).extend(group)
                    urls[int(run["id"])] = run.get("html_url")
                    continue
                for h in group:
                    sent = parse_utc(h.handle.get("dispatched_at"))
                    if sent is not None and self._now() - sent >= LOST_AFTER:
                        out[h.key] = Observation(
                            key=h.key, phase=TrackPhase.FAILED, error=(
                                f"no workflow run named {run_name!r} appeared within "
                                f"{LOST_AFTER} of the dispatch: it created nothing"))
            for ci_run, group in sorted(by_run.items()):
                try:
                    seen = self._observe_run(ci_run, group, urls.get(ci_run))
                    for h in group:  # correlated by title: hand the run id back
                        if h.key in seen and h.handle.get("ci_run_id") != ci_run:
                            seen[h.key] = dataclasses.replace(
                                seen[h.key], handle={**h.handle, "ci_run_id": ci_run})
                    out.update(seen)
                except CircuitOpen:
                    raise
                except ExecutorError as exc:
                    log.warning("observing workflow run %s failed: %s", ci_run, exc.message)
        except CircuitOpen:
            pass
        return out

    def cancel(self, handle: Handle) -> None:
        """Cancel the attempt's workflow run once no other leg of it is still wanted.

        GitHub cancels whole workflow runs, not single matrix legs. A leg tapped out
        while its siblings run is left to its own ``timeout-minutes``; when every open
        leg of the run has been cancelled in this tick, the run is cancelled.
        """
        ci_run = handle.handle.get("ci_run_id")
        if not isinstance(ci_run, int):
            run_name = handle.handle.get("run_name")
            if not run_name:
                return
            wf = self._workflow(str(handle.handle.get("workflow", "track.yml")))
            run = self._find_run(wf, str(run_name), self._since_of(str(run_name)))
            if run is None:
                return
            ci_run = int(run["id"])
        job_name = str(handle.handle.get("job_name", handle.key))
        marked = self._cancel_marked.setdefault(ci_run, set())
        marked.add(job_name)
        jobs = self._jobs(ci_run)
        mine = [j for j in jobs if j.get("name") == job_name]
        if mine and all(j.get("status") == "completed" for j in mine):
            return  # finished already: nothing to stop
        if any(j.get("status") != "completed" and j.get("name") not in marked for j in jobs):
            log.info("workflow run %s: other legs still running; leaving %s to its timeout",
                     ci_run, handle.key)
            return
        response = self._request("POST", f"{self._repo_path}/actions/runs/{ci_run}/cancel")
        if response.status_code not in (202, 409):  # 409: the run already finished
            raise GitHubError(f"cancelling workflow run {ci_run} failed: "
                              f"{response.status_code} {_message(response)}",
                              status=response.status_code)

    # ------------------------------------------------------------------ dispatch

    def _dispatch_batch(self, batch: Batch) -> list[DispatchResult]:
        """POST the batch once; never a second time once GitHub may have created it."""
        since = self._now() - CLOCK_SKEW
        # A batch sent well after its slot may have been sent before by a tick whose
        # record was lost (a state branch rewound and then accepted): look its
        # run-name up first, and adopt that run instead of starting the tracks twice.
        # A batch sent on time skips this, which keeps to one call per dispatch.
        slot = self._since_of(batch.run_name) + CLOCK_SKEW
        if self._now() - slot >= RESEND_LOOKUP_AFTER:
            existing = self._find_run(batch.workflow, batch.run_name,
                                      self._since_of(batch.run_name))
            if existing is not None:
                log.info("%s: already dispatched as workflow run %s; adopting it",
                         batch.run_name, existing["id"])
                return self._adopt(batch, int(existing["id"]), existing.get("html_url"))
        while True:
            body: dict[str, Any] = {"ref": self.ref, "inputs": batch.inputs()}
            if self._details:
                body["return_run_details"] = True
            try:
                response = self._request(
                    "POST", f"{self._repo_path}/actions/workflows/{batch.workflow}/dispatches",
                    body=body, retry=False)
            except GitHubError as exc:
                if exc.rate_limited or (exc.status is not None and exc.status < 500):
                    raise  # refused before anything was created (rate limit, 401)
                # No answer, or a 5xx (GitHub may create the run and then answer 502):
                # the run may exist. Sending again could start the tracks twice, so
                # the batch is looked up by run-name instead, now or by later ticks.
                log.warning("%s: %s; looking the run up by run-name", batch.run_name,
                            exc.message)
                try:
                    return self._correlate(batch, since)
                except ExecutorError:
                    return self._pending(batch)
            if response.status_code in (200, 201, 204):
                return self._accepted(batch, response, since)
            if (response.status_code in (400, 422) and self._details
                    and "return_run_details" in response.text):
                # GitHub Enterprise Server without run details: dispatch plainly and
                # correlate by run-name. Nothing was created by the refused request.
                self._details = False
                continue
            raise GitHubError(
                f"dispatching {batch.run_name} to {batch.workflow} on {self.ref} was refused: "
                f"{response.status_code} {_message(response)}", status=response.status_code)

    def _accepted(self, batch: Batch, response: httpx.Response,
                  since: datetime) -> list[DispatchResult]:
        if response.status_code != 204:
            try:
                data = response.json()
            except ValueError:
                data = None
            if isinstance(data, dict) and isinstance(data.get("workflow_run_id"), int):
                return self._adopt(batch, data["workflow_run_id"], data.get("html_url"))
        return self._correlate(batch, since)

    def _correlate(self, batch: Batch, since: datetime) -> list[DispatchResult]:
        """Find the batch's run by its run-name, polling a little; else a handle that
        ``observe`` resolves once the run shows up."""
        for poll in range(self.correlate_polls):
            if poll and not self._sleep_for(float(2 ** (poll - 1))):
                break
            run = self._find_run(batch.workflow, batch.run_name, since)
            if run is not None:
                return self._adopt(batch, int(run["id"]), run.get("html_url"))
        return self._pending(batch)

    def _adopt(self, batch: Batch, ci_run: int, url: Any) -> list[DispatchResult]:
        html = url if isinstance(url, str) else None
        return [
            DispatchResult(key=key, handle={"ci_run_id": ci_run, "job_name": key,
                                            "run_name": batch.run_name,
                                            "workflow": batch.workflow}, url=html)
            for key in batch.keys
        ]

    def _pending(self, batch: Batch) -> list[DispatchResult]:
        sent = iso(self._now())
        return [
            DispatchResult(key=key, handle={"job_name": key, "run_name": batch.run_name,
                                            "workflow": batch.workflow,
                                            "dispatched_at": sent})
            for key in batch.keys
        ]

    # ------------------------------------------------------------------ lookup

    def _lookup_group(self, run_id: str, workflow: str,
                      group: list[DispatchRequest]) -> dict[str, DispatchResult]:
        runs = self._list_runs(workflow, _slot_of(run_id) - CLOCK_SKEW)
        candidates = sorted(
            (r for r in runs if str(r.get("display_title", "")) == run_id
             or str(r.get("display_title", "")).startswith(run_id + " ")),
            key=lambda r: int(r["id"]),
        )
        by_title: dict[str, dict[str, Any]] = {}
        for run in candidates:
            by_title.setdefault(str(run["display_title"]), run)
        found: dict[str, DispatchResult] = {}
        used: set[int] = set()
        batches, _ = plan_batches(group)
        for batch in batches:
            titled = by_title.get(batch.run_name)
            if titled is not None:
                used.add(int(titled["id"]))
                found.update((r.key, r) for r in self._adopt(batch, int(titled["id"]),
                                                              titled.get("html_url")))
        wanted = {r.key: r for r in group if r.key not in found}
        for run in candidates:
            if not wanted:
                break
            if int(run["id"]) in used:
                continue
            # The batch was dispatched with other companions: its jobs say which keys
            # it carries (one job per leg, named after the dispatch key).
            for job in self._jobs(int(run["id"])):
                request = wanted.pop(str(job.get("name")), None)
                if request is not None:
                    found[request.key] = DispatchResult(
                        key=request.key,
                        handle={"ci_run_id": int(run["id"]), "job_name": request.key,
                                "run_name": str(run["display_title"]), "workflow": workflow},
                        url=run.get("html_url"))
        return found

    def _list_runs(self, workflow: str, since: datetime) -> list[dict[str, Any]]:
        params = {
            "event": "workflow_dispatch",
            "created": f">={since.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}",
            "per_page": "100",
            "exclude_pull_requests": "true",
        }
        return self._paged(f"{self._repo_path}/actions/workflows/{workflow}/runs", params,
                           "workflow_runs", RUN_PAGES)

    def _find_run(self, workflow: str, run_name: str,
                  since: datetime) -> dict[str, Any] | None:
        matches = [r for r in self._list_runs(workflow, since)
                   if r.get("display_title") == run_name]
        return min(matches, key=lambda r: int(r["id"])) if matches else None

    def _since_of(self, run_name: str) -> datetime:
        return _slot_of(run_name.split(" ", 1)[0]) - CLOCK_SKEW

    # ------------------------------------------------------------------ observe

    def _jobs(self, ci_run: int) -> list[dict[str, Any]]:
        return self._paged(f"{self._repo_path}/actions/runs/{ci_run}/jobs",
                           {"filter": "latest", "per_page": "100"}, "jobs", 30)

    def _observe_run(self, ci_run: int, handles: list[Handle],
                     run_url: str | None) -> dict[str, Observation]:
        by_name: dict[str, dict[str, Any]] = {}
        for job in self._jobs(ci_run):
            name = str(job.get("name"))
            if name not in by_name or int(job.get("id", 0)) > int(by_name[name].get("id", 0)):
                by_name[name] = job
        out: dict[str, Observation] = {}
        missing: list[Handle] = []
        for handle in handles:
            leg = by_name.get(str(handle.handle.get("job_name", handle.key)))
            if leg is None:
                missing.append(handle)
            else:
                out[handle.key] = _job_observation(handle.key, ci_run, leg)
        if missing:
            response = self._request("GET", f"{self._repo_path}/actions/runs/{ci_run}")
            try:
                run = response.json() if response.status_code == 200 else None
            except ValueError:
                run = None
            for handle in missing:
                out[handle.key] = _missing_job(handle, ci_run, response.status_code, run,
                                               run_url)
        return out

    # ------------------------------------------------------------------ HTTP

    @property
    def _repo_path(self) -> str:
        return f"repos/{self.repository}"

    @staticmethod
    def _workflow(workflow: str) -> str:
        if not WORKFLOW_RE.fullmatch(workflow):
            raise UserError(f"invalid workflow file name {workflow!r}")
        return workflow

    def _now(self) -> datetime:
        return self._start + timedelta(seconds=self._slept)

    def _sleep_for(self, seconds: float) -> bool:
        """Sleep ``seconds`` if the budget allows; False (and no sleep) otherwise."""
        seconds = max(0.0, seconds)
        if self._slept + seconds > self._budget:
            return False
        if seconds:
            self._sleep(seconds)
            self._slept += seconds
        return True

    def _backoff(self, attempt: int) -> bool:
        return self._sleep_for(min(2.0 ** attempt, 30.0))

    def _failed(self, error: str) -> None:
        self._breaker = breaker_failure(self._breaker, self._now(), error, self.policy)
        if self._breaker.state == "open":
            log.warning("GitHub circuit breaker opened after %d failures: %s",
                        self._breaker.failures, error)

    def _gate(self) -> None:
        self._breaker = breaker_now(self._breaker, self._now(), self.policy)
        if self._breaker.state == "open":
            opened = self._breaker.opened_at
            until = f" until {opened + self.policy.cooldown:%Y-%m-%dT%H:%M:%SZ}" if opened else ""
            raise CircuitOpen(
                f"GitHub circuit breaker is open{until} after {self._breaker.failures} "
                f"failed calls (last: {self._breaker.last_error}); no call was made")
        if self._limited_until is not None:
            wait = (self._limited_until - self._now()).total_seconds()
            if wait > 0 and not self._sleep_for(wait):
                raise GitHubError(
                    f"GitHub rate limit exhausted until "
                    f"{self._limited_until:%Y-%m-%dT%H:%M:%SZ}; no call was made",
                    rate_limited=True)
            self._limited_until = None

    def _rate_wait(self, response: httpx.Response, streak: int) -> float | None:
        """Seconds to wait before retrying a rate-limited response; None if not one."""
        if response.status_code not in (403, 429):
            return None
        retry_after = response.headers.get("retry-after")
        if retry_after:
            try:
                return max(1.0, float(retry_after))
            except ValueError:
                try:
                    when = email.utils.parsedate_to_datetime(retry_after)
                except (TypeError, ValueError):
                    when = None
                if when is not None:
                    return max(1.0, (when - self._now()).total_seconds())
        if response.headers.get("x-ratelimit-remaining") == "0":
            try:
                reset = float(response.headers.get("x-ratelimit-reset", ""))
            except ValueError:
                reset = self._now().timestamp() + SECONDARY_WAIT
            return max(1.0, reset - self._now().timestamp())
        if response.status_code == 429 or "rate limit" in response.text.lower():
            return SECONDARY_WAIT * 2 ** streak
        return None

    def _request(self, method: str, path: str, *, params: Mapping[str, str] | None = None,
                 body: Mapping[str, Any] | None = None, retry: bool = True) -> httpx.Response:
        """One API call with rate-limit waits, and retries of transient failures when
        ``retry`` (never for requests that must not be repeated blindly)."""
        attempt = 0
        limited = 0
        while True:
            self._gate()
            self.calls += 1
            try:
                response = self._client.request(method, path, params=params, json=body,
                                                 headers=self._headers)
            except httpx.TransportError as exc:
                error = f"{method} {path}: no answer ({type(exc).__name__})"
                self._failed(error)
                if retry and attempt + 1 < self.max_attempts and self._backoff(attempt):
                    attempt += 1
                    continue
                raise GitHubError(error, ambiguous=True) from None
            self._note_limits(response)
            wait = self._rate_wait(response, limited)
            if wait is not None:
                limited += 1
                until = self._now() + timedelta(seconds=wait)
                log.info("%s %s: rate limited (%s), waiting %.0fs", method, path,
                         response.status_code, wait)
                if limited > 5 or not self._sleep_for(wait):
                    error = (f"{method} {path}: rate limited ({response.status_code}) "
                             f"until {until:%Y-%m-%dT%H:%M:%SZ}")
                    self._limited_until = until
                    self._failed(error)
                    raise GitHubError(error, status=response.status_code, rate_limited=True)
                continue
            if response.status_code >= 500:
                error = f"{method} {path}: {response.status_code} {_message(response)}".strip()
                self._failed(error)
                if retry and attempt + 1 < self.max_attempts and self._backoff(attempt):
                    attempt += 1
                    continue
                raise GitHubError(error, status=response.status_code)
            if response.status_code == 401:
                raise GitHubError(f"{method} {path}: 401 bad credentials: check the token",
                                  status=401)
            self._breaker = breaker_success(self._breaker)
            return response

    def _note_limits(self, response: httpx.Response) -> None:
        """A successful answer that spends the last request of the window blocks the
        next call until the window resets."""
        if response.status_code < 400 and response.headers.get("x-ratelimit-remaining") == "0":
            try:
                reset = float(response.headers.get("x-ratelimit-reset", ""))
            except ValueError:
                return
            self._limited_until = datetime.fromtimestamp(reset, UTC)

    def _paged(self, path: str, params: Mapping[str, str], key: str,
               max_pages: int) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        url: str | None = path
        query: Mapping[str, str] | None = params
        for _ in range(max_pages):
            if url is None:
                break
            response = self._request("GET", url, params=query)
            if response.status_code != 200:
                raise GitHubError(f"GET {path}: {response.status_code} {_message(response)}",
                                  status=response.status_code)
            try:
                data = response.json()
            except ValueError:  # e.g. an HTML error page from a proxy
                raise GitHubError(f"GET {path}: the answer is not JSON") from None
            page = data.get(key) if isinstance(data, dict) else None
            if not isinstance(page, list):
                raise GitHubError(f"GET {path}: unexpected answer (no {key!r} list)")
            # every caller needs an integer id; anything else is not a run or a job
            items.extend(item for item in page
                         if isinstance(item, dict) and isinstance(item.get("id"), int))
            following = response.links.get("next", {}).get("url")
            if following and not str(following).startswith(self.api_url + "/"):
                # the token goes with every request: never follow a link off the API
                raise GitHubError(f"GET {path}: pagination link leaves {self.api_url}")
            url, query = (following, None) if following else (None, None)
        return items


def _job_observation(key: str, ci_run: int, job: Mapping[str, Any]) -> Observation:
    status = str(job.get("status"))
    conclusion = job.get("conclusion")
    details = {"ci_run_id": ci_run, "job_id": job.get("id"), "status": status,
               "conclusion": conclusion, "runner_name": job.get("runner_name")}
    url = job.get("html_url") if isinstance(job.get("html_url"), str) else None
    if status in _RUNNING:
        started = parse_utc(job.get("started_at")) if status == "in_progress" else None
        return Observation(key=key, phase=TrackPhase.RUNNING, started_at=started, url=url,
                           details=details)
    if status != "completed":
        return Observation(key=key, phase=None, url=url, details=details)
    phase = _CONCLUSION.get(str(conclusion), TrackPhase.FAILED)
    error = None if phase is TrackPhase.COMPLETE else f"job {key} concluded {conclusion}"
    return Observation(key=key, phase=phase, started_at=parse_utc(job.get("started_at")),
                       finished_at=parse_utc(job.get("completed_at")), error=error,
                       url=url, details=details)


def _missing_job(handle: Handle, ci_run: int, status: int, run: Any,
                 run_url: str | None) -> Observation:
    """A dispatched leg with no job: still starting, or the run ended without it."""
    if status == 404:
        return Observation(key=handle.key, phase=TrackPhase.FAILED,
                           error=f"workflow run {ci_run} no longer exists")
    if not isinstance(run, dict):
        return Observation(key=handle.key, phase=None, url=run_url)
    url = run.get("html_url") if isinstance(run.get("html_url"), str) else run_url
    if run.get("status") != "completed":
        return Observation(key=handle.key, phase=None, url=url,
                           details={"ci_run_id": ci_run, "status": run.get("status")})
    conclusion = run.get("conclusion")
    phase = TrackPhase.CANCELLED if conclusion == "cancelled" else TrackPhase.FAILED
    return Observation(
        key=handle.key, phase=phase, url=url,
        finished_at=parse_utc(run.get("updated_at")),
        error=f"workflow run {ci_run} ended ({conclusion}) without a job named {handle.key}",
        details={"ci_run_id": ci_run, "conclusion": conclusion})
