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
    A batch is found again by listing ``workflow_dispatch`` runs created since the
    dispatch and comparing their ``display_title`` with the batch's run-name. Every
    matrix leg's job is named by a hash of its dispatch key (:mod:`.jobnames`: never
    over GitHub's 100 characters), so the jobs of a run tell exactly which keys it
    carries. Before every dispatch the batch is looked up first: nothing on the state
    branch proves a key fresh (a rewind accepted, a mirror restored), so a batch sent
    before is adopted, never repeated.

Observation
    ``GET /actions/runs/{id}/jobs?filter=latest`` (paginated), one listing per workflow
    run whatever its number of tracks (:mod:`.observation`); for legs that finished,
    the outcome files they uploaded, through the artifacts API (:mod:`.artifacts`).

Limits and failures
    Rate limits, retries and the circuit breaker live in the client
    (:mod:`orchestrator.github.client`); the workflow-admin calls (keep-alive, held
    ticks) are :mod:`orchestrator.github.admin`'s, not the executor's.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

import httpx

from ...errors import CircuitOpen, ExecutorError, UserError
from ...github.client import (
    API_VERSION,
    DEFAULT_API_URL,
    DETAILS_ALWAYS,
    GitHubClient,
    GitHubError,
    message,
)
from ...github.settings import api_url_of, token_of, valid_repository
from ...spec.fields import WORKFLOW_RE, check_id, check_run_id
from ...state.breaker import Breaker, BreakerPolicy, breaker_allows
from ...state.phases import TrackPhase
from ...support.times import iso, parse_utc
from ..base import DispatchRequest, DispatchResult, Handle, Observation
from .artifacts import Artifacts, read_outcomes
from .batching import Batch, plan_batches
from .jobnames import is_leg, job_name, match
from .listing import LOST_AFTER, Listing, Window
from .observation import cancelled_by, canceller, job_observation, missing_job

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
        self.artifacts = Artifacts(self.client, repository)
        self._details = True
        self._cancel_marked: dict[int, set[str]] = {}
        self._access_confirmed = False
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
        by_run, pending = self._by_run(handles)
        urls: dict[int, str | None] = {}
        try:
            for (workflow, run_name), group in sorted(pending.items()):
                try:
                    run = self.listing.find(workflow, run_name, self._window(group[0]))
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
                out.update(self._observe_group(ci_run, group, urls.get(ci_run)))
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

    def _observe_group(self, ci_run: int, group: list[Handle], url: str | None
                       ) -> dict[str, Observation]:
        """What workflow run ``ci_run`` shows of ``group``; nothing when asking failed."""
        try:
            seen = self._observe_run(ci_run, group, url)
        except CircuitOpen:
            raise
        except ExecutorError as exc:
            log.warning("observing workflow run %s failed: %s", ci_run, exc.message)
            return {}
        for h in group:  # correlated by title: hand the run id back
            if h.key in seen and h.handle.get("ci_run_id") != ci_run:
                seen[h.key] = dataclasses.replace(
                    seen[h.key], handle={**h.handle, "ci_run_id": ci_run})
        return seen

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
            run = self.listing.find(wf, str(run_name), self._window(handle))
            if run is None:
                return
            ci_run = int(run["id"])
        marked = self._cancel_marked.setdefault(ci_run, set())
        marked.add(handle.key)
        # legs only: the run's fan-in job (no dispatch key for a name) ends by itself
        jobs = [j for j in self.listing.jobs(ci_run) if is_leg(str(j.get("name")))]
        mine = match(jobs, [handle.key]).get(handle.key)
        if mine is not None and mine.get("status") == "completed":
            return  # finished already: nothing to stop
        unwanted = {id(j) for j in match(jobs, marked).values()}
        if any(j.get("status") != "completed" and id(j) not in unwanted for j in jobs):
            log.info("workflow run %s: other legs still running; leaving %s to its timeout",
                     ci_run, handle.key)
            return
        response = self.client.request("POST", f"{self._repo_path}/actions/runs/{ci_run}/cancel")
        if response.status_code not in (202, 409):  # 409: the run already finished
            raise GitHubError(f"cancelling workflow run {ci_run} failed: "
                              f"{response.status_code} {message(response)}",
                              status=response.status_code)

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
            return self._adopt(batch, int(existing["id"]), existing.get("html_url"))
        while True:
            body: dict[str, Any] = {"ref": self.ref, "inputs": batch.inputs()}
            if self._asks_details:
                body["return_run_details"] = True
            try:
                response = self.client.request(
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
                    return self._correlate(batch, window)
                except ExecutorError:
                    return self._pending(batch)
            if response.status_code in (200, 201, 204):
                return self._accepted(batch, response, window)
            if (response.status_code in (400, 422) and self._asks_details
                    and "return_run_details" in response.text):
                # A GitHub that does not know the field (an Enterprise Server not
                # recognised by its URL): dispatch plainly and correlate by run-name.
                # Nothing was created by the refused request.
                self._details = False
                continue
            raise GitHubError(
                f"dispatching {batch.run_name} to {batch.workflow} on {self.ref} was refused: "
                f"{response.status_code} {message(response)}", status=response.status_code)

    def _sent_before(self, batch: Batch) -> dict[str, Any] | None:
        """The workflow run already titled with ``batch``'s run-name, created since its
        slot, if any. One listing per workflow serves every batch of one ``dispatch``
        call (:attr:`_listed`)."""
        since_slot = Window.since_slot(batch.run_name, self.client.now())
        listed = self._listed.get(batch.workflow)
        if listed is None or listed[0].start > since_slot.start:
            listed = (since_slot, self.listing.runs(batch.workflow, since_slot))
            self._listed[batch.workflow] = listed
        matches = [r for r in listed[1] if r.get("display_title") == batch.run_name]
        return min(matches, key=lambda r: int(r["id"])) if matches else None

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
                return self._adopt(batch, data["workflow_run_id"], data.get("html_url"))
        return self._correlate(batch, window)

    def _correlate(self, batch: Batch, window: Window) -> list[DispatchResult]:
        """Find the batch's run by its run-name, polling a little; else a handle that
        ``observe`` resolves once the run shows up."""
        for poll in range(self.correlate_polls):
            if poll and not self.client.sleep_for(float(2 ** (poll - 1))):
                break
            run = self.listing.find(batch.workflow, batch.run_name, window)
            if run is not None:
                return self._adopt(batch, int(run["id"]), run.get("html_url"))
        return self._pending(batch)

    def _adopt(self, batch: Batch, ci_run: int, url: Any) -> list[DispatchResult]:
        html = url if isinstance(url, str) else None
        return [
            DispatchResult(key=key, handle={"ci_run_id": ci_run, "job_name": job_name(key),
                                            "run_name": batch.run_name,
                                            "workflow": batch.workflow}, url=html)
            for key in batch.keys
        ]

    def _pending(self, batch: Batch) -> list[DispatchResult]:
        sent = iso(self.client.now())
        return [
            DispatchResult(key=key, handle={"job_name": job_name(key),
                                            "run_name": batch.run_name,
                                            "workflow": batch.workflow,
                                            "dispatched_at": sent})
            for key in batch.keys
        ]

    # ------------------------------------------------------------------ lookup

    def _lookup_group(self, run_id: str, workflow: str,
                      group: list[DispatchRequest]) -> dict[str, DispatchResult]:
        runs = self._lookup_runs(workflow, group)
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
            # it carries (one job per leg, named by a hash of its dispatch key).
            for key in match(self.listing.jobs(int(run["id"])), list(wanted)):
                request = wanted.pop(key)
                found[request.key] = DispatchResult(
                    key=request.key,
                    handle={"ci_run_id": int(run["id"]), "job_name": job_name(request.key),
                            "run_name": str(run["display_title"]), "workflow": workflow},
                    url=run.get("html_url"))
        return found

    def _lookup_runs(self, workflow: str,
                     group: list[DispatchRequest]) -> list[dict[str, Any]]:
        """The runs created while the group's dispatches may have been sent: one listing
        per mark time (usually one: a tick marks a run's tracks together)."""
        marks = sorted({r.marked_at for r in group if r.marked_at is not None})
        windows = [Window.marked_at(m) for m in marks]
        if len(marks) < len(group):
            windows.append(Window.since_slot(group[0].run_id, self.client.now()))
        runs: dict[int, dict[str, Any]] = {}
        for window in windows:
            runs.update((int(r["id"]), r) for r in self.listing.runs(workflow, window))
        return list(runs.values())

    def _window(self, handle: Handle) -> Window:
        sent = parse_utc(handle.handle.get("dispatched_at"))
        if sent is not None:
            return Window.sent_at(sent)
        return Window.since_slot(str(handle.handle.get("run_name", "")), self.client.now())

    # ------------------------------------------------------------------ observe

    def _observe_run(self, ci_run: int, handles: list[Handle],
                     run_url: str | None) -> dict[str, Observation]:
        try:
            jobs = self.listing.jobs(ci_run)
        except GitHubError as exc:
            if exc.status != 404:
                raise
            # The run was deleted: GitHub answers 404 for its jobs as for itself. So it
            # does for a token that cannot read the repository: ask before failing.
            self._confirm_access(ci_run)
            return {h.key: missing_job(h, ci_run, 404, None, run_url) for h in handles}
        legs = match(jobs, [h.key for h in handles])
        out: dict[str, Observation] = {}
        missing: list[Handle] = []
        for handle in handles:
            leg = legs.get(handle.key)
            if leg is None:
                missing.append(handle)
            else:
                out[handle.key] = job_observation(handle, ci_run, leg)
        if missing:
            response = self.client.request("GET", f"{self._repo_path}/actions/runs/{ci_run}")
            if response.status_code == 404:
                self._confirm_access(ci_run)
            try:
                run = response.json() if response.status_code == 200 else None
            except ValueError:
                run = None
            for handle in missing:
                out[handle.key] = missing_job(handle, ci_run, response.status_code, run,
                                               run_url)
        return self._with_canceller(ci_run, read_outcomes(self.artifacts, ci_run, out))

    def _confirm_access(self, ci_run: int) -> None:
        """Before a 404 fails tracks as deleted: can this token list the repository's
        runs at all? GitHub answers 404, not 403, for a repository a token may not see
        (docs, "Troubleshooting the REST API"), so a wrong or narrowed token would
        otherwise fail every open track. One listing of one run, once per tick."""
        if self._access_confirmed:
            return
        response = self.client.request("GET", f"{self._repo_path}/actions/runs",
                                       params={"per_page": "1"})
        if response.status_code != 200:
            raise GitHubError(
                f"workflow run {ci_run} answers 404 and so does the list of {self.repository}'s "
                f"runs ({response.status_code}): the token cannot read this repository's "
                "Actions (check GITHUB_TOKEN or ORCHESTRATOR_TOKEN, and `actions: read`); "
                "no track is failed for it", status=response.status_code)
        self._access_confirmed = True

    def _with_canceller(self, ci_run: int, seen: dict[str, Observation]
                        ) -> dict[str, Observation]:
        """Legs a person cancelled, with who did: one annotations request per run."""
        cancelled = [k for k, o in seen.items() if o.phase is TrackPhase.CANCELLED
                     and isinstance(o.details.get("job_id"), int)]
        if not cancelled:
            return seen
        job_id = seen[cancelled[0]].details["job_id"]
        actor, readable = None, False
        try:
            response = self.client.request(
                "GET", f"{self._repo_path}/check-runs/{job_id}/annotations",
                params={"per_page": "100"})
            data = response.json() if response.status_code == 200 else None
            readable = isinstance(data, list)
            actor = canceller(data) if isinstance(data, list) else None
            if response.status_code != 200:
                log.info("who cancelled workflow run %s is not known: annotations answered "
                         "%s", ci_run, response.status_code)
        except (GitHubError, ValueError) as exc:
            log.info("who cancelled workflow run %s is not known: %s", ci_run, exc)
        return {k: cancelled_by(o, ci_run, actor, readable) if k in cancelled else o
                for k, o in seen.items()}

    # ------------------------------------------------------------------ paths

    @property
    def _repo_path(self) -> str:
        return f"repos/{self.repository}"

    @staticmethod
    def _workflow(workflow: str) -> str:
        if not WORKFLOW_RE.fullmatch(workflow):
            raise UserError(f"invalid workflow file name {workflow!r}")
        return workflow
