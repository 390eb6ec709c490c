"""What the console's pages make of a run: rows, filters and sorting, the phase timeline, the verdict banner, the gate
bar's buttons, and that whatever a run holds is escaped (the templates rendered as the routes render them)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from api.console import views
from api.console.routes import templates
from api.main import _summary

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def run(name: str = "r1", *, phase: str | None = "Running", gate: dict[str, Any] | None = None,
        **extra: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "startedAt": "2026-03-01T11:59:00Z", **extra.pop("status", {})}
    if gate is not None:
        status["gate"] = gate
    return {"metadata": {"name": name, "namespace": "team", "creationTimestamp": "2026-03-01T11:58:30Z",
                         "resourceVersion": "7", "labels": extra.pop("labels", {})},
            "spec": {"agentRef": extra.pop("agent", "helper"), "task": "do it", **extra}, "status": status}


def test_rows_filter_and_sort() -> None:
    rows = [views.row(run("b", phase="Succeeded"), NOW),
            views.row(run("a", gate={"state": "pending"}, labels={"sympozium.ai/schedule": "nightly"}), NOW),
            views.row(run("c", agent="other"), NOW)]
    assert rows[1].awaiting and rows[1].schedule == "nightly" and rows[0].age == "1m30s"
    assert [r.name for r in views.Filters(awaiting=True).apply(rows)] == ["a"]
    assert [r.name for r in views.Filters(agent="other").apply(rows)] == ["c"]
    assert [r.name for r in views.Filters(schedule="nightly").apply(rows)] == ["a"]
    assert [r.name for r in views.Filters(phase="Running", sort="name", desc=False).apply(rows)] == ["a", "c"]
    assert [r.name for r in views.Filters(sort="name", desc=True).apply(rows)] == ["c", "b", "a"]
    assert [r.name for r in views.Filters(sort="nonsense", desc=False).apply(rows)] == ["a", "b", "c"]


def test_the_timeline_has_times_and_durations_from_the_status() -> None:
    done = run(phase="Succeeded", gate={"state": "approved", "requestedAt": "2026-03-01T11:59:20Z"},
               status={"completedAt": "2026-03-01T11:59:50Z"})
    steps = views.timeline(done, NOW)
    assert [(s.phase, s.duration, s.current) for s in steps] == [
        ("Pending", "30s", False), ("Running", "20s", False), ("PostRunning", "30s", False),
        ("Succeeded", "", True)]
    live = views.timeline(run(), NOW)
    assert [(s.phase, s.duration, s.current) for s in live] == [("Pending", "30s", False), ("Running", "1m00s", True)]
    # PostRunning without a gate records no start: shown without a time, not guessed.
    post = views.timeline(run(phase="PostRunning"), NOW)
    assert [(s.phase, s.at, s.duration) for s in post][-1] == ("PostRunning", "", "")


def test_banners_by_verdict() -> None:
    assert views.banner(run(gate={"state": "pending"})) is None and views.banner(run()) is None
    tones = {s: views.banner(run(gate={"state": s, "decidedBy": "alice"})) for s in
             ("approved", "rejected", "rewritten", "timeout", "error", "retries-exhausted")}
    assert {s: b["tone"] for s, b in tones.items() if b} == {
        "approved": "ok", "rejected": "bad", "rewritten": "info", "timeout": "bad", "error": "bad",
        "retries-exhausted": "bad"}
    assert tones["approved"] is not None and tones["approved"]["by"] == "alice"


def head(obj: dict[str, Any]) -> str:
    return templates.get_template("_head.html").render(
        name=obj["metadata"]["name"], namespace="team", row=views.row(obj), st=obj["status"], csrf="tok",
        temporal="", banner=views.banner(obj), gate_open=views.gate_open(obj), retry=views.has_retry(obj))


def test_the_gate_bar_offers_retry_only_with_lifecycle_retry() -> None:
    waiting = run(phase="PostRunning", gate={"state": "pending"})
    html = head(waiting)
    assert 'value="approve"' in html and 'value="reject"' in html and 'value="rewrite"' in html
    assert 'value="retry"' not in html and 'name="csrf" value="tok"' in html
    assert 'value="retry"' in head(run(phase="PostRunning", gate={"state": "pending"},
                                       lifecycle={"retry": {"maxAttempts": 2}}))
    assert "gatebar" not in head(run(phase="Succeeded", gate={"state": "approved"}))


def test_what_a_run_holds_is_escaped_everywhere() -> None:
    hostile = '<img src=x onerror=alert(1)>'
    obj = run(name="r1", agent=hostile, phase="Failed", gate={"state": "rejected", "decidedBy": hostile,
                                                             "reason": hostile},
              status={"error": hostile, "result": hostile,
                      "conditions": [{"type": "StepFailed", "status": "True", "message": hostile}]})
    rows = views.Filters().apply([views.row(obj, NOW)])
    table = templates.get_template("_runs_table.html").render(
        rows=rows, total=1, namespace="team", f=views.Filters(), base_query="namespace=team")
    detail = templates.get_template("_run_detail.html").render(
        name="r1", namespace="team", spec=obj["spec"], st=obj["status"], task=hostile, model=hostile,
        created_by=hostile, timeline=views.timeline(obj, NOW))
    toast = templates.get_template("_toast.html").render(r=views.row(obj, NOW))
    for html in (table, detail, toast, head(obj)):
        assert "<img" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_a_retried_run_shows_the_last_attempts_logs_and_offers_the_others() -> None:
    def logs(last: int, shown: int | None) -> str:
        return templates.get_template("_logs.html").render(
            name="r 1", namespace="team", st={"attempt": last}, last_attempt=last, log_attempt=shown,
            hooks=[("preRun", "fetch"), ("postRun", "gate")])
    html = logs(2, None)
    assert "(attempt 2 of 2)" in html and html.count("<button") == 2 and 'aria-pressed="true">Attempt 2<' in html
    assert 'sse-connect="/runs/r%201/log-stream?namespace=team&amp;attempt=2"' in html
    assert 'sse-connect="/runs/r%201/log-stream?namespace=team&amp;attempt=2&amp;hook=gate"' in html
    assert 'hx-get="/runs/r%201/part/logs?namespace=team&amp;attempt=1"' in html
    assert 'sse-connect="/runs/r%201/log-stream?namespace=team&amp;attempt=1"' in logs(2, 1)
    single = logs(1, None)
    assert "<button" not in single and "attempt 1 of" not in single


def test_a_run_written_with_sympoziums_older_names_shows_its_agent() -> None:
    older = run()
    older["spec"] = {"instanceRef": "legacy-agent", "input": "do it"}
    assert views.row(older, NOW).agent == "legacy-agent"
    assert _summary(older).agent == "legacy-agent"
    detail = templates.get_template("_run_detail.html").render(
        name="r1", namespace="team", spec=older["spec"], st=older["status"], task="do it", model="m",
        created_by="", timeline=views.timeline(older, NOW))
    assert '<dd id="agent">legacy-agent</dd>' in detail


def test_a_run_refused_when_it_started_never_shows_a_running_step() -> None:
    """`startedAt` is written with Pending: a run whose spec was refused at start has one, and never ran."""
    refused = run(phase="Failed", status={"completedAt": "2026-03-01T11:59:01Z", "error": "spec.task: required"})
    assert [s.phase for s in views.timeline(refused, NOW)] == ["Pending", "Failed"]
    failed_agent = run(phase="Failed", status={"jobName": "r1", "completedAt": "2026-03-01T11:59:30Z"})
    assert [s.phase for s in views.timeline(failed_agent, NOW)] == ["Pending", "Running", "Failed"]


def test_a_response_the_gate_held_back_is_not_a_green_success() -> None:
    """The phase stays Succeeded (Sympozium's); the console says the response was rejected, in red, and the phase badge
    is not green."""
    rejected = run(phase="Succeeded", gate={"state": "rejected", "decidedBy": "alice"})
    rejected["status"]["gateVerdict"] = "rejected"
    r = views.row(rejected, NOW)
    assert (r.phase, r.outcome) == ("Succeeded", "response rejected")
    html = head(rejected)
    assert 'phase-succeeded phase-held" id="phase">Succeeded</span>' in html
    assert '<span class="badge outcome" id="outcome">response rejected</span>' in html
    detail = templates.get_template("_run_detail.html").render(
        run=rejected, name="r1", namespace="team", spec=rejected["spec"], st=rejected["status"], row=r, task="do it",
        timeline=views.timeline(rejected, NOW), hooks=[], last_attempt=1)
    assert "phase-succeeded phase-held" in detail and 'class="badge phase phase-succeeded"' not in detail
    approved = run(phase="Succeeded", gate={"state": "approved"})
    approved["status"]["gateVerdict"] = "approved"
    assert views.row(approved, NOW).outcome == "" and "outcome" not in head(approved)


def test_the_runs_list_shows_the_first_line_of_each_error() -> None:
    failed = run(phase="Failed", status={"error": "spec.model.provider: unknown provider \"opneai\"\nmore"})
    assert views.row(failed, NOW).error == 'spec.model.provider: unknown provider "opneai"'
    assert views.short("x" * 200).endswith("…") and len(views.short("x" * 200)) == views.ERROR_CHARS


def test_a_runs_cost_tokens_per_model_and_trace_are_shown_escaped() -> None:
    hostile = '<img src=x onerror=alert(1)>'
    usage = {"inputTokens": 1500, "outputTokens": 300, "totalTokens": 1800, "estimatedCostUSD": "0.0125",
             "models": [{"model": hostile, "calls": 2, "inputTokens": 1500, "outputTokens": 300,
                         "estimatedCostUSD": "0.0125"}]}
    obj = run(phase="Succeeded", status={"tokenUsage": usage, "traceID": "4bf92f3577b34da6a3ce929d0e0e4736"})
    detail = templates.get_template("_run_detail.html").render(
        name="r1", namespace="team", spec=obj["spec"], st=obj["status"], task="t", model="m", created_by="c",
        timeline=views.timeline(obj, NOW))
    assert '<td id="cost">$0.0125</td>' in detail and "4bf92f3577b34da6a3ce929d0e0e4736" in detail
    assert "<img" not in detail and "&lt;img src=x onerror=alert(1)&gt;" in detail
    unpriced = run(phase="Succeeded", status={"tokenUsage": {"totalTokens": 5}})
    assert "no price known" in templates.get_template("_run_detail.html").render(
        name="r1", namespace="team", spec=unpriced["spec"], st=unpriced["status"], task="t", model="m",
        created_by="c", timeline=views.timeline(unpriced, NOW))
    template = "https://tempo.example/trace/{traceID}"
    link = views.trace_link(template, obj["status"]["traceID"])
    assert link == "https://tempo.example/trace/4bf92f3577b34da6a3ce929d0e0e4736"
    assert 'id="trace" href="https://tempo.example/trace/4bf92f3577b34da6a3ce929d0e0e4736"' in \
        templates.get_template("_head.html").render(
            name="r1", namespace="team", row=views.row(obj), st=obj["status"], csrf="tok", temporal="", trace=link,
            banner=views.banner(obj), gate_open=False, retry=False)
    # A status is anyone's to write: only a real trace ID becomes a link; no template, no link.
    assert views.trace_link(template, 'x" onmouseover="alert(1)') == "" and views.trace_link("", "a" * 32) == ""
    assert 'id="trace"' not in head(obj)


def test_the_trace_url_template_must_be_an_http_url_with_the_trace_id() -> None:
    import pytest
    from pydantic import ValidationError

    from api.settings import ApiSettings

    assert ApiSettings(trace_url_template="https://tempo.example/trace/{traceID}").trace_url_template
    for bad in ("https://tempo.example/trace/", "javascript:alert(1)//{traceID}"):
        with pytest.raises(ValidationError, match="AGENTRUN_TRACE_URL_TEMPLATE"):
            ApiSettings(trace_url_template=bad)


def test_an_agents_usage_sums_its_finished_runs_of_the_last_30_days_by_day() -> None:
    def done(day: str, cost: str | None, tokens: int, phase: str = "Succeeded") -> dict[str, Any]:
        usage: dict[str, Any] = {"totalTokens": tokens}
        if cost is not None:
            usage["estimatedCostUSD"] = cost
        return run(phase=phase, status={"completedAt": f"{day}T10:00:00Z", "tokenUsage": usage})
    runs = [done("2026-03-01", "0.5", 100), done("2026-03-01", "0.25", 50), done("2026-02-20", "1", 10),
            done("2026-02-20", None, 7), done("2026-01-01", "9", 1), run(phase="Running")]
    u = views.agent_usage(runs, NOW)
    assert (u.runs, u.tokens, u.cost, u.unpriced) == (4, 167, Decimal("1.75"), 1)
    assert len(u.days) == 30 and u.days[-1].label == "2026-03-01" and u.days[-1].cost == Decimal("0.75")
    assert max(d.height for d in u.days) == views.CHART_HEIGHT and u.days[-1].height == 37
    html = templates.get_template("agent.html").render(
        request=None, who=None, section="agents", namespace="team", name="a", kind="Agent", spec={}, defaults={},
        model="m", lc={}, hooks=[], runs=6, source="", usage=u)
    assert '<dd id="usage-cost">$1.75' in html and 'title="2026-03-01: $0.75, 150 tokens"' in html
    assert '<meter min="0" max="50" value="37"' in html, "the day's bar, to scale"
    chart = html.split('id="cost-chart"')[1].split("</table>")[0]
    assert "style=" not in chart and "<svg" not in chart and "<img" not in chart, "no inline style (the CSP), no image"
