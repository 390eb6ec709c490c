"""The kept logs' pure parts: the ConfigMap's name and keys, the tail cut to a byte budget, and reading one back only
from a ConfigMap the run owns."""

from __future__ import annotations

from models import run_logs


def test_the_tail_keeps_the_end_within_the_limit_from_a_line_start_and_says_it_was_cut() -> None:
    text = "".join(f"line {i:04d}\n" for i in range(1000))
    kept = run_logs.tail(text, 200)
    assert len(kept.encode()) <= 200
    assert kept.startswith(run_logs.CUT_MARK) and kept.endswith("line 0999\n")
    assert kept[len(run_logs.CUT_MARK):].startswith("line ")  # whole lines
    assert run_logs.tail("short\n", 200) == "short\n"


def test_the_tail_never_splits_a_character() -> None:
    kept = run_logs.tail("é" * 500, 101)
    assert len(kept.encode()) <= 101 and kept.endswith("é") and "\ufffd" not in kept


def test_many_containers_share_what_one_configmap_holds() -> None:
    assert run_logs.per_container(3, 32 * 1024) == 32 * 1024
    assert run_logs.per_container(100, 32 * 1024) * 100 <= run_logs.MAX_KEPT_BYTES
    assert run_logs.per_container(0, 1000) == 1000


def test_names_and_keys_are_valid_kubernetes_names() -> None:
    assert run_logs.logs_name("weekly-report") == "weekly-report-logs"
    long = run_logs.logs_name("a" * 253)
    assert len(long) <= 253 and long.endswith("-logs") and long != run_logs.logs_name("a" * 252 + "b")
    assert run_logs.log_key("weekly-report-prerun", "pre-fetch") == "weekly-report-prerun.pre-fetch"


def test_a_kept_log_is_read_only_from_the_runs_own_configmap() -> None:
    cm = run_logs.manifest(namespace="ns", run="r", uid="uid-1", logs={run_logs.log_key("r", "agent"): "hello\n"})
    assert cm["metadata"]["ownerReferences"][0] == {"apiVersion": "sympozium.ai/v1alpha1", "kind": "AgentRun",
                                                    "name": "r", "uid": "uid-1"}
    assert run_logs.kept_log(cm, run_uid="uid-1", job="r", container="agent") == "hello\n"
    assert run_logs.kept_log(cm, run_uid="uid-1", job="r", container="pre-x") is None
    assert run_logs.kept_log(cm, run_uid="uid-2", job="r", container="agent") is None, "an earlier run's"
    assert run_logs.kept_log(None, run_uid="uid-1", job="r", container="agent") is None
