"""The GitHub Actions executor: one ``workflow_dispatch`` run per batch, one matrix leg
per track.

Dispatch
    ``POST /repos/{o}/{r}/actions/workflows/{workflow}/dispatches`` with the batch's
    inputs (:mod:`.batching`). With API version 2022-11-28 on api.github.com the body
    asks ``return_run_details: true`` and GitHub answers ``200`` with the new run's id;
    from 2026-03-10 on it always does and the field is gone; GitHub Enterprise Server
    has no such field and answers ``204``. Without an id the run is found by its
    ``run-name``.

Correlation
    A batch is found again by its run-name or its jobs' names (:mod:`.correlation`).
    Before every dispatch the batch is looked up first: nothing on the state branch
    proves a key fresh (a rewind accepted, a mirror restored), so a batch sent before
    is adopted, never repeated.

Observation
    ``GET /actions/runs/{id}/jobs?filter=latest`` (paginated), one listing per workflow
    run whatever its number of tracks (:mod:`.watching`, :mod:`.observation`); for legs
    that finished, the outcome files they uploaded, through the artifacts API
    (:mod:`.artifacts`).

Limits and failures
    Rate limits, retries and the circuit breaker live in the client
    (:mod:`orchestrator.github.client`); the workflow-admin calls (keep-alive, held
    ticks) are :mod:`orchestrator.github.admin`'s, not the executor's.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import httpx

from ...config.fieldtypes import WORKFLOW_RE, check_id, check_run_id
from ...errors import CircuitOpen, ExecutorError, UserError
from ...github.client import (
    API_VERSION,
    DEFAULT_API_URL,
    DETAILS_ALWAYS,
    GitHubClient,
    GitHubError,
    message,
)
from ...github.connect import api_url_of, token_of, valid_repository
from ...state.breaker import Breaker, BreakerPolicy, breaker_allows
from ...state.phases import TrackPhase
from ...support.times import parse_utc
from ..base import DispatchRequest, DispatchResult, Handle, Observation
from .artifacts import Artifacts
from .batching import Batch, plan_batches
from .correlation import adopt, correlate, first_titled, lookup_group, pending, window_of
from .jobnames import is_leg, match
from .listing import LOST_AFTER, Listing, Window
from .watching import RunWatch

log = logging.getLogger(__name__)

class GitHubExecutor:
    """Runs tracks as matrix legs of ``workflow_dispatch`` runs on GitHub Actions.

    ``now`` is the tick's time; the executor's client advances it by the seconds it
    sleeps and never reads the clock itself, so breaker and rate-limit decisions are
    reproducible. ``max_wait_seconds`` bounds all sleeping (backoff and rate limits)
    of one executor, that is of one tick.
    """

    name = "github"
    machine = None
    """Any tick may look a dispatch up on GitHub: no machine claims it."""

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
        if not valid_repository(repository):
            raise UserError(f"invalid GitHub repository {repository!r}: expected owner/name")
        if not token:
            raise UserError("no GitHub token: set GITHUB_TOKEN (or pass a token)")
        self.repository = repository
        self.ref = ref
        self.correlate_polls = max(1, correlate_polls)
        self.client = GitHubClient(
            token, api_url=api_url, now=now, breaker=breaker, policy=policy, sleep=sleep,
            max_wait_seconds=max_wait_seconds, client=client, timeout=timeout,
            max_attempts=max_attempts, api_version=api_version)
        self.listing = Listing(self.client, repository)
        self.watch = RunWatch(self.client, self.listing,
                              Artifacts(self.client, repository), repository)
        self._details = True
        self._cancel_marked: dict[int, set[str]] = {}
        self._legs_seen: dict[int, list[dict[str, Any]]] = {}
        """Workflow run -> its legs' jobs, listed once for the cancels of this tick: a
        batch of 256 legs is 3 pages, not 3 pages per leg."""
        self._listed: dict[str, tuple[Window, list[dict[str, Any]]]] = {}
        """Workflow -> the runs listed for :meth:`_sent_before` in this ``dispatch``."""

    @property
    def api_url(self) -> str:
        return self.client.api_url

    @property
    def policy(self) -> BreakerPolicy:
        return self.client.policy

    @property
    def calls(self) -> int:
        """HTTP requests sent by this executor (for the tick's log and tests)."""
        return self.client.calls

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
        token = token or token_of(env)
        if not token:
            raise UserError("GITHUB_TOKEN is not set: pass the workflow's token to the tick "
                            "step (env: GITHUB_TOKEN: ${{ github.token }})")
        return cls(
            repository,
            token,
            api_url=api_url_of(env),
            ref=env.get("ORCHESTRATOR_DISPATCH_REF") or env.get("GITHUB_REF_NAME") or "main",
            breaker=breaker,
            now=now,
            **options,
        )

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> GitHubExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ protocol

    def health(self) -> Breaker:
        return self.client.breaker

    @property
    def available(self) -> bool:
        """False while the breaker is open: no call would be made."""
        return breaker_allows(self.client.breaker, self.client.now(), self.policy)

    def dispatch(self, requests: list[DispatchRequest]) -> list[DispatchResult]:
        results: dict[str, DispatchResult] = {}
        valid: list[DispatchRequest] = []
        for request in requests:
            try:
                check_run_id(request.run_id)
                check_id(request.track, "track name")
                self._workflow(request.workflow)
            except UserError as exc:  # this request's own fault: the others still go
                results[request.key] = DispatchResult(key=request.key, error=exc.message)
            else:
                valid.append(request)
        batches, rejected = plan_batches(valid)
        results.update((r.key, r) for r in rejected)
        self._listed = {}
        # the earliest slot first: its listing covers the later batches' windows
        batches.sort(key=lambda b: Window.since_slot(b.run_name, self.client.now()).start)
        for batch in batches:
            results.update((r.key, r) for r in self._dispatch_or_say_why(batch))
        return [results[r.key] for r in requests]

    def _dispatch_or_say_why(self, batch: Batch) -> list[DispatchResult]:
        """The batch's results; a batch that could not go is an error per key."""
        try:
            return self._dispatch_batch(batch)
        except ExecutorError as exc:
            # Neither an open breaker nor a rate limit let GitHub create anything: those
            # tracks go again once GitHub takes calls, and spend no attempt.
            unsent = isinstance(exc, CircuitOpen) or (
                isinstance(exc, GitHubError) and exc.rate_limited)
            return [DispatchResult(key=key, error=exc.message, not_sent=unsent)
                    for key in batch.keys]

    def lookup(self, requests: list[DispatchRequest]) -> dict[str, DispatchResult | None]:
        found: dict[str, DispatchResult | None] = {}
        groups: dict[tuple[str, str], list[DispatchRequest]] = {}
        for request in requests:
            groups.setdefault((request.run_id, self._workflow(request.workflow)),
                              []).append(request)
        for (run_id, workflow), group in sorted(groups.items()):
            try:
                hits = lookup_group(self.listing, run_id, workflow, group,
                                    self.client.now())
                # asked and answered: what is not among the hits does not exist
                found.update({r.key: hits.get(r.key) for r in group})
            except CircuitOpen:
                break
            except ExecutorError as exc:
                log.warning("lookup of %s failed: %s", run_id, exc.message)
        return found

    def observe(self, handles: list[Handle]) -> dict[str, Observation]:
        out: dict[str, Observation] = {}
        by_run, pending = self._by_run(handles)
        urls: dict[int, str | None] = {}
        try:
            for (workflow, run_name), group in sorted(pending.items()):
                try:
                    run = self.listing.find(workflow, run_name,
                                            window_of(group[0], self.client.now()))
                except CircuitOpen:
                    raise
                except ExecutorError as exc:
                    log.warning("looking up %s failed: %s", run_name, exc.message)
                    continue
                if run is not None:
                    by_run.setdefault(int(run["id"]), []).extend(group)
                    urls[int(run["id"])] = run.get("html_url")
                else:
                    out.update(self._lost_dispatches(run_name, group))
            for ci_run, group in sorted(by_run.items()):
                out.update(self.watch.group(ci_run, group, urls.get(ci_run)))
        except CircuitOpen:
            pass  # the breaker opened: no more calls, and what was seen so far stands
        return out

    def _by_run(self, handles: list[Handle]
                ) -> tuple[dict[int, list[Handle]], dict[tuple[str, str], list[Handle]]]:
        """The handles by workflow run id, and those without one yet by (workflow,
        run-name), to be found by their title."""
        by_run: dict[int, list[Handle]] = {}
        pending: dict[tuple[str, str], list[Handle]] = {}
        for handle in handles:
            ci_run = handle.handle.get("ci_run_id")
            if isinstance(ci_run, int):
                by_run.setdefault(ci_run, []).append(handle)
            elif handle.handle.get("run_name"):
                wf = self._workflow(str(handle.handle.get("workflow", "track.yml")))
                pending.setdefault((wf, str(handle.handle["run_name"])), []).append(handle)
        return by_run, pending

    def _lost_dispatches(self, run_name: str, group: list[Handle]) -> dict[str, Observation]:
        """Failures for the dispatches of ``group`` whose workflow run never appeared."""
        out: dict[str, Observation] = {}
        for h in group:
            sent = parse_utc(h.handle.get("dispatched_at"))
            if sent is not None and self.client.now() - sent >= LOST_AFTER:
                out[h.key] = Observation(
                    key=h.key, phase=TrackPhase.FAILED, error=(
                        f"no workflow run named {run_name!r} appeared within "
                        f"{LOST_AFTER} of the dispatch: it created nothing"))
        return out

    def cancel(self, handle: Handle) -> None:
        """Cancel the attempt's workflow run once no other leg of it is still wanted.

        GitHub cancels whole workflow runs, not single matrix legs. A leg tapped out
        while its siblings run is left to its own ``timeout-minutes``, a queued leg to
        a later tick's cancel (the planner moves it on only once it is seen cancelled);
        when every open leg of the run has been cancelled in this tick, the run is.
        """
        ci_run = self._run_of(handle)
        if ci_run is None or self._other_legs_run(ci_run, handle.key):
            return
        response = self.client.request("POST", f"{self._repo_path}/actions/runs/{ci_run}/cancel")
        if response.status_code not in (202, 409):  # 409: the run already finished
            raise GitHubError(f"cancelling workflow run {ci_run} failed: "
                              f"{response.status_code} {message(response)}",
                              status=response.status_code)

    def _run_of(self, handle: Handle) -> int | None:
        """The workflow run of ``handle``: named, else found by its run-name."""
        ci_run = handle.handle.get("ci_run_id")
        if isinstance(ci_run, int):
            return ci_run
        run_name = handle.handle.get("run_name")
        if not run_name:
            return None
        wf = self._workflow(str(handle.handle.get("workflow", "track.yml")))
        run = self.listing.find(wf, str(run_name), window_of(handle, self.client.now()))
        return None if run is None else int(run["id"])

    def _other_legs_run(self, ci_run: int, key: str) -> bool:
        """Whether cancelling ``key`` leaves ``ci_run`` alone: its leg has finished, or a
        leg not cancelled in this tick still runs. Marks ``key`` as cancelled."""
        marked = self._cancel_marked.setdefault(ci_run, set())
        marked.add(key)
        # legs only: the run's fan-in job (no dispatch key for a name) ends by itself
        if ci_run not in self._legs_seen:
            self._legs_seen[ci_run] = [j for j in self.listing.jobs(ci_run)
                                       if is_leg(str(j.get("name")))]
        jobs = self._legs_seen[ci_run]
        mine = match(jobs, [key]).get(key)
        if mine is not None and mine.get("status") == "completed":
            return True  # finished already: nothing to stop
        unwanted = {id(j) for j in match(jobs, marked).values()}
        if any(j.get("status") != "completed" and id(j) not in unwanted for j in jobs):
            log.info("workflow run %s: other legs still running; not cancelling it for %s",
                     ci_run, key)
            return True
        return False

    # ------------------------------------------------------------------ dispatch

    def _dispatch_batch(self, batch: Batch) -> list[DispatchResult]:
        """POST the batch once; never a second time once GitHub may have created it."""
        window = Window.sent_at(self.client.now())
        # Nothing on the state branch proves a key fresh: an accepted rewind or a
        # restored mirror (which brings its own high-water ref back) replays keys
        # already sent. GitHub is the witness: the run-name is looked up first, and a
        # run found is adopted instead of starting the tracks twice.
        try:
            existing = self._sent_before(batch)
        except CircuitOpen:
            raise
        except ExecutorError as exc:
            # Unasked is not absent: sending blind could start the tracks twice. Nothing
            # is spent; the tracks go again once GitHub answers.
            return [DispatchResult(key=key, not_sent=True, error=(
                f"could not check whether {batch.run_name} was dispatched before: "
                f"{exc.message}")) for key in batch.keys]
        if existing is not None:
            log.info("%s: already dispatched as workflow run %s; adopting it",
                     batch.run_name, existing["id"])
            return adopt(batch, int(existing["id"]), existing.get("html_url"))
        return self._send(batch, window)

    def _send(self, batch: Batch, window: Window) -> list[DispatchResult]:
        """POST the batch; on no answer or a 5xx, look it up instead of sending again."""
        while True:
            body: dict[str, Any] = {"ref": self.ref, "inputs": batch.inputs()}
            if self._asks_details:
                body["return_run_details"] = True
            try:
                response = self.client.request(
                    "POST", f"{self._repo_path}/actions/workflows/{batch.workflow}/dispatches",
                    body=body, retry=False)
            except GitHubError as exc:
                return self._unanswered(batch, window, exc)
            if response.status_code in (200, 201, 204):
                return self._accepted(batch, response, window)
            if not self._refused_details(response):
                raise GitHubError(
                    f"dispatching {batch.run_name} to {batch.workflow} on {self.ref} was "
                    f"refused: {response.status_code} {message(response)}",
                    status=response.status_code)
            # A GitHub that does not know the field (an Enterprise Server not recognised
            # by its URL): dispatch plainly and correlate by run-name. Nothing was
            # created by the refused request.
            self._details = False

    def _refused_details(self, response: httpx.Response) -> bool:
        """Whether a refusal names ``return_run_details``, which this GitHub lacks."""
        return (response.status_code in (400, 422) and self._asks_details
                and "return_run_details" in response.text)

    def _unanswered(self, batch: Batch, window: Window,
                    exc: GitHubError) -> list[DispatchResult]:
        if exc.rate_limited or (exc.status is not None and exc.status < 500):
            raise exc  # refused before anything was created (rate limit, 401)
        # No answer, or a 5xx (GitHub may create the run and then answer 502): the run
        # may exist. Sending again could start the tracks twice, so the batch is
        # looked up by run-name instead, now or by later ticks.
        log.warning("%s: %s; looking the run up by run-name", batch.run_name, exc.message)
        try:
            return self._correlate(batch, window)
        except ExecutorError:
            return pending(batch, self.client.now())

    def _sent_before(self, batch: Batch) -> dict[str, Any] | None:
        """The workflow run already titled with ``batch``'s run-name, created since its
        slot, if any. One listing per workflow serves every batch of one ``dispatch``
        call (:attr:`_listed`)."""
        since_slot = Window.since_slot(batch.run_name, self.client.now())
        listed = self._listed.get(batch.workflow)
        if listed is None or listed[0].start > since_slot.start:
            listed = (since_slot, self.listing.runs(batch.workflow, since_slot))
            self._listed[batch.workflow] = listed
        return first_titled(listed[1], batch.run_name)

    @property
    def _asks_details(self) -> bool:
        """Whether a dispatch sends ``return_run_details``: never to GitHub Enterprise
        Server, which has no such field, nor from API version 2026-03-10 on, which
        removed it and always answers with the details."""
        return (self._details and not self.client.enterprise
                and self.client.api_version < DETAILS_ALWAYS)

    def _accepted(self, batch: Batch, response: httpx.Response,
                  window: Window) -> list[DispatchResult]:
        if response.status_code != 204:
            try:
                data = response.json()
            except ValueError:
                data = None
            if isinstance(data, dict) and isinstance(data.get("workflow_run_id"), int):
                return adopt(batch, data["workflow_run_id"], data.get("html_url"))
        return self._correlate(batch, window)

    def _correlate(self, batch: Batch, window: Window) -> list[DispatchResult]:
        return correlate(self.listing, self.client, batch, window, self.correlate_polls,
                         self.client.now())

    # ------------------------------------------------------------------ paths

    @property
    def _repo_path(self) -> str:
        return f"repos/{self.repository}"

    @staticmethod
    def _workflow(workflow: str) -> str:
        if not WORKFLOW_RE.fullmatch(workflow):
            raise UserError(f"invalid workflow file name {workflow!r}")
        return workflow
