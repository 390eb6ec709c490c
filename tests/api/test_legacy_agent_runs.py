"""A run of an Agent that exists only as a SympoziumInstance (the Agent's older kind, SPEC §1.1) is created through the
API and the console as `kubectl apply` creates it (issue 26, item 4): the run resolves either kind, so the API's
"does the Agent exist" check must look at both, and the console's new-run form offers both.

In-process, with the session's localkube and no Temporal (creating the AgentRun object is all these routes do)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import pytest
from kubernetes import client, config

from api.main import State, create_app
from api.settings import ApiSettings
from cli.roles import bind, ensure_roles, user
from cli.up import install_crds
from localkube.testing import Handle
from models.names import AGENTRUNS, GROUP, VERSION

TOKEN = "t-legacy-agent-runs-0123"
LEGACY = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "SympoziumInstance", "metadata": {"name": "legacy"},
          "spec": {"provider": {"name": "openai", "model": "gpt-4o", "apiKeySecret": "key"}}}


@pytest.fixture(scope="module")
def kube(localkube: Handle) -> Iterator[client.ApiClient]:
    install_crds(localkube.kubeconfig)
    api = config.new_client_from_config(str(localkube.kubeconfig))
    ensure_roles(api)
    yield api
    api.close()


@pytest.fixture
async def app(tmp_path: Path, kube: client.ApiClient, namespace: str) -> AsyncIterator[httpx.AsyncClient]:
    client.CustomObjectsApi(kube).create_namespaced_custom_object(GROUP, VERSION, namespace, "sympoziuminstances",
                                                                  LEGACY)
    bind(kube, "everything", [user("legacy@example.com")], namespace=namespace)
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN} legacy@example.com\n")
    settings = ApiSettings(token_file=str(tokens))
    a = create_app(settings)
    a.state.agentrun = State(settings, kube, None, a.state.auth)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=a), base_url="http://api") as c:
        yield c


def runs(kube: client.ApiClient, namespace: str) -> list[dict[str, Any]]:
    got = client.CustomObjectsApi(kube).list_namespaced_custom_object(GROUP, VERSION, namespace, AGENTRUNS)
    return list(cast(dict[str, Any], got)["items"])


async def test_the_api_creates_a_run_of_an_agent_that_exists_only_as_a_sympozium_instance(
        app: httpx.AsyncClient, kube: client.ApiClient, namespace: str) -> None:
    r = await app.post("/api/v1/runs", params={"namespace": namespace}, json={"agentRef": "legacy", "task": "hello"},
                       headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 201, r.text
    (run,) = runs(kube, namespace)
    assert run["metadata"]["name"] == r.json()["metadata"]["name"]
    assert run["spec"]["agentRef"] == "legacy" and run["spec"]["task"] == "hello"


async def test_the_api_still_answers_404_for_an_agent_of_neither_kind(app: httpx.AsyncClient, kube: client.ApiClient,
                                                                     namespace: str) -> None:
    r = await app.post("/api/v1/runs", params={"namespace": namespace}, json={"agentRef": "ghost", "task": "hello"},
                       headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 404 and r.json()["detail"] == f'agent "ghost" not found in namespace "{namespace}"'
    assert runs(kube, namespace) == []


async def test_the_consoles_new_run_form_offers_and_creates_a_run_of_a_sympozium_instance(
        app: httpx.AsyncClient, kube: client.ApiClient, namespace: str) -> None:
    signed = await app.post("/signin", data={"token": TOKEN, "next": "/signin"})
    assert signed.status_code == 303, signed.text
    form = await app.get("/new-run", params={"namespace": namespace})
    assert form.status_code == 200
    assert re.search(r'<option[^>]*>legacy</option>', form.text), form.text
    m = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert m
    r = await app.post("/new-run", params={"namespace": namespace},
                       data={"csrf": m.group(1), "agent": "legacy", "task": "from the console"})
    assert r.status_code == 303, r.text[:2000]
    (run,) = runs(kube, namespace)
    assert run["spec"]["agentRef"] == "legacy" and run["spec"]["task"] == "from the console"
    assert r.headers["location"].endswith(f"/runs/{run['metadata']['name']}?namespace={namespace}")
