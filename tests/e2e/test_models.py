"""A Sympozium Model applies unchanged and says on itself that it is not served here (models/model.py).

Against the session stack: the real kubectl, localkube with our CRDs, the leading bridge writing the status.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import yaml

from models.model import NOT_OFFERED
from models.names import GROUP, VERSION
from tests.conftest import Kubectl
from tests.e2e.conftest import Stack
from tests.waiting import wait_for

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sympozium" / "model.yaml"


def _model(stack: Stack, ns: str, name: str) -> dict[str, Any]:
    return cast(dict[str, Any], stack.custom.get_namespaced_custom_object(GROUP, VERSION, ns, "models", name))


def _marked(stack: Stack, ns: str, name: str, generation: int) -> dict[str, Any] | None:
    obj = _model(stack, ns, name)
    st = obj.get("status") or {}
    ready: dict[str, Any] = next((c for c in st.get("conditions") or [] if c.get("type") == "Ready"), {})
    done = st.get("phase") == "Failed" and ready.get("observedGeneration") == generation
    return obj if done else None


def test_a_model_applies_strictly_and_is_marked_as_not_served_here(stack: Stack, namespace: str,
                                                                   kubectl: Kubectl) -> None:
    doc = yaml.safe_load(FIXTURE.read_text())
    out = kubectl("apply", "--validate=strict", "-n", namespace, "-f", str(FIXTURE))
    assert out.returncode == 0, out.stderr
    obj = wait_for(lambda: _marked(stack, namespace, "small-chat-q4", 1), timeout=30,
                   what="the bridge to mark the Model")
    assert obj["spec"] == doc["spec"]  # nothing pruned, nothing defaulted into it
    status = obj["status"]
    assert status["message"] == NOT_OFFERED and "endpoint" not in status
    [ready] = status["conditions"]
    assert (ready["status"], ready["reason"], ready["message"]) == ("False", "NotOffered", NOT_OFFERED)
    # An edit is a new generation: said again for it, with the time it first became false kept.
    stack.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, "models", "small-chat-q4",
                                                {"spec": {"resources": {"gpu": 2}}})
    again = wait_for(lambda: _marked(stack, namespace, "small-chat-q4", 2), timeout=30, what="generation 2 marked")
    assert again["status"]["conditions"][0]["lastTransitionTime"] == ready["lastTransitionTime"]
    listed = kubectl("get", "models", "-n", namespace)
    assert listed.returncode == 0 and "Failed" in listed.stdout and "vllm" in listed.stdout, listed.stdout
