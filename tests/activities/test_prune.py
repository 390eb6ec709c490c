"""Which runs history pruning deletes (SPEC §6): the pure selection, and how runs and Agents are read."""

from __future__ import annotations

from typing import Any

import pytest

from activities.prune import RunEntry, agent_limit, run_entry, select_for_pruning
from models.prune import PruneRequest


def run(name: str, *, agent: str = "a", ns: str = "ns", phase: str = "Succeeded", completed: str | None = None,
        created: str = "2024-05-01T00:00:00Z", deleting: bool = False, ref: str = "agentRef") -> RunEntry:
    obj: dict[str, Any] = {"metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "resourceVersion": "7",
                                        "creationTimestamp": created},
                           "spec": {ref: agent}, "status": {"phase": phase}}
    if completed:
        obj["status"]["completedAt"] = completed
    if deleting:
        obj["metadata"]["deletionTimestamp"] = "2024-05-02T00:00:00Z"
    return run_entry(obj)


def at(minute: int) -> str:
    return f"2024-05-01T10:{minute:02d}:00Z"


def names(runs: list[RunEntry]) -> list[str]:
    return [r.name for r in runs]


def test_keeps_the_newest_n_terminal_runs_and_deletes_the_rest_oldest_first() -> None:
    runs = [run(f"r{i}", completed=at(i)) for i in (4, 1, 6, 3, 5, 2)]
    plan = select_for_pruning(runs, limits={}, default=3)
    assert names(plan.delete) == ["r1", "r2", "r3"]
    [h] = plan.agents
    assert (h.namespace, h.agent, h.limit, h.limit_source, h.kept, h.deleted, h.untouched) == \
        ("ns", "a", 3, "default", 3, 3, 0)


def test_fewer_terminal_runs_than_the_limit_deletes_nothing() -> None:
    plan = select_for_pruning([run("r1", completed=at(1)), run("r2", completed=at(2))], limits={}, default=50)
    assert plan.delete == [] and plan.agents[0].kept == 2


@pytest.mark.parametrize("phase", ["", "Pending", "Running", "PostRunning"])
def test_a_run_that_is_not_terminal_is_never_deleted_nor_counted(phase: str) -> None:
    # The active run is the oldest of all; with a limit of 1 it would go first were it counted.
    runs = [run("active", phase=phase, created=at(0)), run("r1", completed=at(1)), run("r2", completed=at(2))]
    plan = select_for_pruning(runs, limits={}, default=1)
    assert names(plan.delete) == ["r1"]
    assert (plan.agents[0].kept, plan.agents[0].untouched) == (1, 1)


def test_every_terminal_phase_is_prunable() -> None:
    runs = [run("f", phase="Failed", completed=at(1)), run("s", phase="Skipped", completed=at(2)),
            run("ok", phase="Succeeded", completed=at(3))]
    assert names(select_for_pruning(runs, limits={}, default=0).delete) == ["f", "s", "ok"]


def test_a_run_already_being_deleted_is_left_alone_and_not_counted() -> None:
    runs = [run("going", completed=at(9), deleting=True), run("r1", completed=at(1)), run("r2", completed=at(2))]
    plan = select_for_pruning(runs, limits={}, default=1)
    assert names(plan.delete) == ["r1"]
    assert plan.agents[0].untouched == 1


def test_the_agents_own_limit_wins_over_the_default_both_ways() -> None:
    runs = [run(f"{a}{i}", agent=a, completed=at(i)) for a in ("small", "big", "unset") for i in range(1, 5)]
    plan = select_for_pruning(runs, limits={("ns", "small"): 1, ("ns", "big"): 10, ("ns", "unset"): None},
                              default=2)
    assert names(plan.delete) == ["small1", "small2", "small3", "unset1", "unset2"]
    by_agent = {h.agent: (h.limit, h.limit_source, h.kept) for h in plan.agents}
    assert by_agent == {"small": (1, "agent", 1), "big": (10, "agent", 4), "unset": (2, "default", 2)}


def test_a_limit_of_zero_deletes_every_terminal_run() -> None:
    runs = [run("r1", completed=at(1)), run("live", phase="Running")]
    plan = select_for_pruning(runs, limits={("ns", "a"): 0}, default=50)
    assert names(plan.delete) == ["r1"]


def test_runs_of_an_agent_that_no_longer_exists_get_the_default() -> None:
    runs = [run(f"r{i}", agent="ghost", completed=at(i)) for i in range(1, 4)]
    plan = select_for_pruning(runs, limits={("ns", "other"): 0}, default=1)
    assert names(plan.delete) == ["r1", "r2"]
    assert plan.agents[0].limit_source == "default"


def test_agents_of_the_same_name_in_other_namespaces_are_counted_apart() -> None:
    runs = [run(f"{ns}-{i}", ns=ns, completed=at(i)) for ns in ("one", "two") for i in (1, 2)]
    plan = select_for_pruning(runs, limits={("one", "a"): 1}, default=5)
    assert names(plan.delete) == ["one-1"]
    assert [(h.namespace, h.kept) for h in plan.agents] == [("one", 1), ("two", 2)]


def test_instance_ref_names_the_agent_as_agent_ref_does() -> None:
    runs = [run("old", ref="instanceRef", completed=at(1)), run("new", completed=at(2))]
    plan = select_for_pruning(runs, limits={}, default=1)
    assert names(plan.delete) == ["old"] and len(plan.agents) == 1


def test_newest_is_by_completion_then_creation_then_name() -> None:
    runs = [
        run("late-finisher", created=at(0), completed=at(30)),  # created first, finished last: newest
        run("b", created=at(5), completed=at(20)),
        run("a", created=at(5), completed=at(20)),  # same completion and creation as b: the name decides
        run("earlier-created", created=at(4), completed=at(20)),
        run("first-done", created=at(1), completed=at(10)),
    ]
    plan = select_for_pruning(runs, limits={}, default=1)
    assert names(plan.delete) == ["first-done", "earlier-created", "a", "b"]


def test_fractional_seconds_are_compared_as_times_not_as_text() -> None:
    # As text "…:00Z" sorts after "…:00.5Z"; as times it is half a second earlier.
    runs = [run("whole", completed="2024-05-01T10:00:00Z"), run("half", completed="2024-05-01T10:00:00.5Z")]
    assert names(select_for_pruning(runs, limits={}, default=1).delete) == ["whole"]


def test_a_terminal_run_without_completed_at_counts_as_completed_when_created() -> None:
    runs = [run("no-completion", created=at(15)), run("done-10", created=at(1), completed=at(10)),
            run("done-20", created=at(2), completed=at(20))]
    assert names(select_for_pruning(runs, limits={}, default=1).delete) == ["done-10", "no-completion"]


def test_malformed_run_fields_do_not_stop_the_selection() -> None:
    bad = run_entry({"metadata": {"name": "bad", "namespace": "ns", "creationTimestamp": "yesterday"},
                     "spec": "not a map", "status": {"phase": "Failed", "completedAt": 12}})
    good = run("good", agent="", completed=at(1))
    plan = select_for_pruning([bad, good], limits={}, default=1)
    assert names(plan.delete) == ["bad"]


def agent_obj(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "a", "namespace": "ns"}, "spec": spec}


@pytest.mark.parametrize(("spec", "limit"), [
    ({"agents": {"default": {"runHistoryLimit": 3}}}, 3),
    ({"agents": {"default": {"runHistoryLimit": 0}}}, 0),
    ({"agents": {"default": {"model": "m"}}}, None),
    ({"provider": {"name": "echo", "model": "m"}, "agents": {"default": {"runHistoryLimit": 7}}}, 7),
    ({"agents": {"default": {"runHistoryLimit": -1}}}, None),
    ({"agents": {"default": {"runHistoryLimit": "many"}}}, None),
    ({}, None),
])
def test_agent_limit_reads_run_history_limit_of_either_shape(spec: dict[str, Any], limit: int | None) -> None:
    assert agent_limit(agent_obj(**spec)) == limit


def test_the_global_default_is_fifty_and_cannot_be_negative() -> None:
    assert PruneRequest().keep == 50
    with pytest.raises(ValueError, match="greater than or equal to 0"):
        PruneRequest(keep=-1)
