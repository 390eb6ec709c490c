"""Made: the cleanup step removes the Jobs and the workspace the run made, and writes the final status first."""

from __future__ import annotations

from models.agentrun import AgentRunStatus
from models.run import StatusUpdate
from models.steps import JobRef, JobStarted, StatusChange
from tests.workflows.cluster import resolved_run
from workflows.made import Made


def _job(name: str) -> JobRef:
    return JobRef(name=name, namespace="ns", uid=f"uid-{name}", component="agent-run")


def test_the_cleanup_removes_every_job_started_and_the_workspace_once_known() -> None:
    made = Made()
    made.started(JobStarted(job=_job("r-prerun"), workspace_uid="pvc-1"))
    made.started(JobStarted(job=_job("r")))  # a later step finds no new workspace: the known one stays
    run = resolved_run()
    req, summary = made.clean_up(run.ref, run, kill=False, final=None)
    assert [j.name for j in req.jobs] == ["r-prerun", "r"] and req.workspace_uid == "pvc-1"
    assert (req.kill, req.keep_jobs, req.final) == (False, False, None)
    assert summary == "clean up Jobs, workspace and RBAC; release the run"


def test_a_kept_runs_jobs_stay_and_the_final_status_is_written_first() -> None:
    run = resolved_run().model_copy(update={"cleanup": "keep"})
    final = StatusChange(ref=run.ref, update=StatusUpdate(status=AgentRunStatus(phase="Succeeded")))
    req, summary = Made().clean_up(run.ref, run, kill=True, final=final)
    assert (req.keep_jobs, req.kill, req.final) == (True, True, final)
    assert summary == "write status: Succeeded; clean up Jobs, workspace and RBAC; release the run"


def test_a_run_that_never_resolved_keeps_nothing() -> None:
    run = resolved_run()
    req, _ = Made().clean_up(run.ref, None, kill=False, final=None)
    assert req.run is None and not req.keep_jobs and req.jobs == [] and req.workspace_uid is None
