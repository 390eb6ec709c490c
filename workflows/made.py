"""What a run has made so far, for its cleanup step to remove (SPEC §3.9): its Jobs and its workspace.

The cleanup step deletes only what the workflow knows of (all of the run's Jobs when it kills them), and
the workspace with its uid as a precondition, so nothing is read first. Pure bookkeeping for
AgentRunWorkflow: no I/O.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from models.resolve import ResolvedRun, RunRef
    from models.steps import CleanUp, JobRef, JobStarted, StatusChange


class Made:
    def __init__(self) -> None:
        self.jobs: list[JobRef] = []
        self.workspace_uid: str | None = None  # once a step made (or found) the workspace
        self.cleaned = False  # cleaned up (and released) as the gate began to wait: nothing left to remove
        self.gone: set[str] = set()  # uids of Jobs deleted (their logs kept) as a gate began to wait

    def cleaned_up(self) -> None:
        """Everything made so far was removed: a later cleanup (a kill) starts from nothing known."""
        self.jobs, self.workspace_uid, self.cleaned = [], None, True

    def started(self, started: JobStarted) -> None:
        """A step started a Job (and perhaps made the workspace)."""
        self.jobs.append(started.job)
        self.workspace_uid = started.workspace_uid or self.workspace_uid

    def clean_up(self, ref: RunRef, run: ResolvedRun | None, *, kill: bool,
                 final: StatusChange | None) -> tuple[CleanUp, str]:
        """The cleanup step's request and summary: remove what the run made (its Jobs unless `cleanup: keep`,
        all of them when `kill`; not those already gone), after writing its `final` status if it has one."""
        jobs = self.jobs if kill else [j for j in self.jobs if j.uid not in self.gone]
        req = CleanUp(ref=ref, run=run, jobs=jobs, keep_jobs=run is not None and run.cleanup == "keep",
                      kill=kill, workspace_uid=self.workspace_uid, final=final)
        summary = "clean up Jobs, workspace and RBAC; release the run"
        if final is not None:
            summary = f"write status: {final.update.status.phase}; {summary}"
        return req, summary
