"""The schedule bridge against a real API server (localkube): what it does with an outdated event."""

from __future__ import annotations

import copy
from typing import Any, cast

from kubernetes import client
from temporalio.client import Client

from bridge.schedules import ScheduleSync
from cli.stack import free_port
from cli.up import install_crds
from kube import Kube
from localkube.testing import Handle
from models.names import GROUP, VERSION

PLURAL = "sympoziumschedules"


async def test_an_event_outdated_by_a_later_edit_is_left_to_the_later_one(
        localkube: Handle, kube: client.ApiClient, namespace: str) -> None:
    install_crds(localkube.kubeconfig)
    custom = client.CustomObjectsApi(kube)
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "SympoziumSchedule", "metadata": {"name": "nightly"},
            "spec": {"agentRef": "helper", "schedule": "0 3 * * *", "task": "hello"}}
    seen = cast(dict[str, Any], custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body))
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "nightly",
                                          {"metadata": {"labels": {"team": "ops"}}})
    # A Temporal that is never reached: this event must end before the bridge would mirror the schedule.
    temporal = await Client.connect(f"127.0.0.1:{free_port()}", lazy=True)
    sync = ScheduleSync(Kube(kube), temporal, task_queue="agentrun")

    await sync.on_schedule("ADDED", copy.deepcopy(seen))  # the version from before the label: its patch conflicts

    now = cast(dict[str, Any], custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "nightly"))
    assert not now["metadata"].get("finalizers"), now["metadata"]
    assert "status" not in now or not now["status"].get("phase"), now["status"]
    assert now["metadata"]["labels"] == {"team": "ops"}
