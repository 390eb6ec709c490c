"""Grants and Secrets checked against their author (issue 27, holes 1 to 3; SPEC §1.5), at the admission webhooks,
with SubjectAccessReviews answered by the real localkube's RBAC.

Users of the module's namespace: "owner" may get the Secrets "team-key" and "db" and holds `configmaps get`;
"runner" holds nothing; "ops" holds `nodes list` cluster-wide; "the-api", "the-worker" and "the-bridge" are the
control plane components the API trusts to carry an author (and hold nothing either). Like test_admission.py: the API
app in-process, its Kubernetes client against localkube, Agents as real objects.
"""

from __future__ import annotations

import base64
import copy
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from kubernetes import client, config

from api.main import State, create_app
from api.settings import ApiSettings
from cli.up import install_crds
from localkube.testing import Handle
from models.authorship import TrustedComponents
from tests.api.test_admission import TOKEN, G, V, review

RBAC = "rbac.authorization.k8s.io"
READ_CM = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}
READ_SECRETS = {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["team-key", "db"]}
LIST_NODES = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}
TRUSTED = TrustedComponents(api=["the-api"], worker=["the-worker"], bridge=["the-bridge"])


def _obj(kind: str, name: str, spec: dict[str, Any], **notes: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if notes:
        meta["annotations"] = dict(notes)
    return {"apiVersion": f"{G}/{V}", "kind": kind, "metadata": meta, "spec": spec}


@pytest.fixture(scope="module")
def ns(localkube: Handle) -> Iterator[str]:
    install_crds(localkube.kubeconfig)
    api = config.new_client_from_config(str(localkube.kubeconfig))
    core: Any = client.CoreV1Api(api)
    rbac: Any = client.RbacAuthorizationV1Api(api)
    custom = client.CustomObjectsApi(api)
    name = f"grants-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    rbac.create_namespaced_role(name, {"metadata": {"name": "owner"}, "rules": [READ_CM, READ_SECRETS]})
    rbac.create_namespaced_role_binding(name, {
        "metadata": {"name": "owner"}, "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "owner"},
        "subjects": [{"kind": "User", "name": "owner", "apiGroup": RBAC}]})
    cluster = f"{name}-ops"
    rbac.create_cluster_role({"metadata": {"name": cluster}, "rules": [LIST_NODES]})
    rbac.create_cluster_role_binding({
        "metadata": {"name": cluster}, "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": cluster},
        "subjects": [{"kind": "User", "name": "ops", "apiGroup": RBAC}]})
    for agent in (
            _obj("Agent", "keyed", {"agents": {"default": {"model": "gpt-4o"}},
                                    "authRefs": [{"provider": "openai", "secret": "team-key"}]}),
            _obj("Agent", "hooked", {"agents": {"default": {"model": "m", "lifecycle": {
                "postRun": [{"name": "report", "image": "busybox", "command": ["true"]}], "rbac": [READ_CM]}}}})):
        custom.create_namespaced_custom_object(G, V, name, "agents", agent)
    yield name
    rbac.delete_cluster_role_binding(cluster)
    rbac.delete_cluster_role(cluster)
    core.delete_namespace(name)
    api.close()


@pytest.fixture(scope="module")
def state(localkube: Handle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[State]:
    tokens = tmp_path_factory.mktemp("grants") / "tokens"
    tokens.write_text(f"{TOKEN} alice@example.com\n")
    kube = config.new_client_from_config(str(localkube.kubeconfig))
    yield State(ApiSettings(token_file=str(tokens), trusted=TRUSTED), kube, None)
    kube.close()


@pytest.fixture
async def webhook(state: State) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(state.settings)
    app.state.agentrun = state
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as c:
        yield c


def request(ns: str, plural: str, obj: dict[str, Any], user: str, *, op: str = "CREATE",
            old: dict[str, Any] | None = None) -> dict[str, Any]:
    body = review(ns, {**obj, "metadata": {**obj["metadata"], "namespace": ns}}, op=op, old=old)
    body["request"]["resource"] = body["request"]["requestResource"] = {"group": G, "version": V, "resource": plural}
    body["request"]["kind"] = body["request"]["requestKind"] = {"group": G, "version": V, "kind": obj["kind"]}
    body["request"]["userInfo"] = {"username": user, "groups": ["system:authenticated"]}
    return body


PATHS = {"agentruns": "/admission/agentruns", "agents": "/admission/agents", "sympoziuminstances": "/admission/agents",
         "skillpacks": "/admission/packs",
         "ensembles": "/admission/packs", "personapacks": "/admission/packs",
         "sympoziumschedules": "/admission/schedules"}


async def admit(webhook: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, Any]:
    r = await webhook.post(PATHS[body["request"]["resource"]["resource"]], json=body)
    assert r.status_code == 200, r.text
    resp: dict[str, Any] = r.json()["response"]
    assert resp["uid"] == body["request"]["uid"]
    return resp


def refused(resp: dict[str, Any], start: str) -> str:
    assert resp["allowed"] is False, resp
    assert (resp["status"]["code"], resp["status"]["reason"]) == (403, "Forbidden"), resp
    message: str = resp["status"]["message"]
    assert message.startswith(start), message
    return message


def run(name: str, agent: str, **spec: Any) -> dict[str, Any]:
    return _obj("AgentRun", name, {"agentRef": agent, "task": "t", **spec})


def secret_env(secret: str) -> dict[str, Any]:
    return {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": secret, "key": "token"}}}


# -- Secrets by reference (hole 1) ----------------------------------------------------------------------------------

async def test_a_run_naming_a_secret_its_creator_cannot_read_is_refused_naming_the_field_and_the_secret(
        webhook: httpx.AsyncClient, ns: str) -> None:
    """Before, a hook's env could read any Secret of the namespace into its output for whoever created the run."""
    hooked = {"postRun": [{"name": "leak", "image": "busybox", "env": [{"name": "A", "value": "1"},
                                                                      secret_env("db")]}]}
    message = refused(await admit(webhook, request(ns, "agentruns", run("r", "hooked", lifecycle=hooked), "runner")),
                      'spec.lifecycle.postRun[0].env[1].valueFrom.secretKeyRef.name: "runner" may not get Secret '
                      f'"db" in namespace "{ns}"')
    assert "nobody can hand a run a Secret they cannot read themselves" in message
    refused(await admit(webhook, request(ns, "agentruns", run("r", "keyed", model={"authSecretRef": "db"}),
                                         "runner")),
            'spec.model.authSecretRef: "runner" may not get Secret "db"')
    refused(await admit(webhook, request(ns, "agentruns", run("r", "hooked", imagePullSecrets=[{"name": "regcred"}]),
                                         "owner")),
            'spec.imagePullSecrets[0].name: "owner" may not get Secret "regcred"')
    for spec in ({"lifecycle": hooked}, {"model": {"authSecretRef": "db"}}):
        assert (await admit(webhook, request(ns, "agentruns", run("r", "hooked", **spec), "owner")))["allowed"]


async def test_a_run_may_use_its_agents_key_but_send_it_only_where_the_agent_does(
        webhook: httpx.AsyncClient, ns: str) -> None:
    """The Agent's owner lends its key to runs whose creators cannot read it; such a run may not point the key at an
    endpoint, program or process of its own choosing (before, a run's own baseURL got the key as a Bearer header)."""
    async def as_runner(**spec: Any) -> dict[str, Any]:
        return await admit(webhook, request(ns, "agentruns", run("r", "keyed", **spec), "runner"))

    assert (await as_runner())["allowed"] is True
    assert (await as_runner(env={"VERBOSE": "1"}, model={"model": "gpt-4o-mini"}))["allowed"] is True
    for spec, field in (({"model": {"baseURL": "http://127.0.0.1:9/v1"}}, "spec.model.baseURL"),
                        ({"model": {"provider": "ollama"}}, "spec.model.provider"),
                        ({"image": "registry.example/mine:1"}, "spec.image"),
                        ({"env": {"HTTPS_PROXY": "http://127.0.0.1:9"}}, "spec.env.HTTPS_PROXY"),
                        ({"env": {"PYTHONPATH": "/workspace"}}, "spec.env.PYTHONPATH")):
        message = refused(await as_runner(**spec), f'{field} (would send the provider key of Agent "keyed", Secret '
                                                   '"team-key", elsewhere than the Agent does): "runner" may not get '
                                                   'Secret "team-key"')
        assert message
        # Whoever may read the key may send it where they like.
        assert (await admit(webhook, request(ns, "agentruns", run("r", "keyed", **spec), "owner")))["allowed"]
    # MODEL_BASE_URL in the run's env is the agent's endpoint: agentrun sets it from the model, and no run's env may
    # replace it, whoever may read the key (models/policy.py RESERVED_AGENT_ENV).
    for who in ("runner", "owner"):
        refused(await admit(webhook, request(ns, "agentruns", run("r", "keyed", env={"MODEL_BASE_URL": "http://x/v1"}),
                                             who)), "spec.env.MODEL_BASE_URL: MODEL_BASE_URL is set for the agent by agentrun")


async def test_what_the_control_plane_creates_is_checked_as_the_author_it_carries(
        webhook: httpx.AsyncClient, ns: str) -> None:
    """A run made through the API (or a schedule's tick, by the worker) is checked as the author it carries, not as
    the component: before, an API-created run was checked as the API's ServiceAccount and a tick as the worker."""
    hooked = {"postRun": [{"name": "h", "image": "busybox", "env": [secret_env("db")]}]}

    def carried(author: str) -> dict[str, Any]:
        return _obj("AgentRun", "r", {"agentRef": "hooked", "task": "t", "lifecycle": hooked}, **{
            "agentrun.dev/created-by": author, "agentrun.dev/created-by-groups": '["system:authenticated"]'})

    for component in ("the-api", "the-worker"):
        assert (await admit(webhook, request(ns, "agentruns", carried("owner"), component)))["allowed"] is True
        refused(await admit(webhook, request(ns, "agentruns", carried("runner"), component)),
                'spec.lifecycle.postRun[0].env[0].valueFrom.secretKeyRef.name: "runner" may not get Secret "db"')
    # The bridge carries authors onto Agents and schedules, not runs; nobody else carries any.
    for user in ("the-bridge", "runner"):
        message = refused(await admit(webhook, request(ns, "agentruns", carried("owner"), user)),
                          "agentrun.dev/created-by")
        assert f'must name the user creating the run ("{user}")' in message
    # A run inheriting the Agent's lifecycle rules is checked for them as its carried author too.
    inherits = _obj("AgentRun", "r", {"agentRef": "hooked", "task": "t"}, **{"agentrun.dev/created-by": "runner"})
    refused(await admit(webhook, request(ns, "agentruns", inherits, "the-worker")),
            'spec.lifecycle.rbac[0] (inherited from Agent "hooked" spec.agents.default.lifecycle.rbac[0]): "runner" '
            "may not grant get configmaps")


# -- Agents: Secrets, and hook changes as new grants (holes 1 and 2) ------------------------------------------------

def agent(name: str, **defaults: Any) -> dict[str, Any]:
    return _obj("Agent", name, {"agents": {"default": {"model": "m", **defaults}}})


def as_written(obj: dict[str, Any], user: str) -> dict[str, Any]:
    """`obj` as the mutating webhook leaves a write by `user` that changes what it grants: stamped as theirs."""
    out = copy.deepcopy(obj)
    out["metadata"]["annotations"] = {**(out["metadata"].get("annotations") or {}), "agentrun.dev/author": user,
                                      "agentrun.dev/author-groups": '["system:authenticated"]'}
    return out


LIFECYCLE = {"postRun": [{"name": "report", "image": "busybox", "command": ["sh", "-c", "echo ok"]}],
             "rbac": [READ_CM]}


async def test_an_agents_secrets_are_checked_against_its_writer(webhook: httpx.AsyncClient, ns: str) -> None:
    body = _obj("Agent", "a", {"agents": {"default": {"model": "m"}},
                               "mcpServers": [{"name": "t", "toolsPrefix": "t", "authSecret": "db"}],
                               "observability": {"enabled": True, "headersSecretRef": "team-key"}})
    refused(await admit(webhook, request(ns, "agents", body, "runner")),
            'spec.mcpServers[0].authSecret: "runner" may not get Secret "db"')
    assert (await admit(webhook, request(ns, "agents", body, "owner")))["allowed"] is True
    legacy = _obj("SympoziumInstance", "s", {"provider": {"name": "openai", "apiKeySecret": "other"}})
    refused(await admit(webhook, request(ns, "sympoziuminstances", legacy, "owner")),
            'spec.provider.apiKeySecret: "owner" may not get Secret "other"')


async def test_any_change_to_an_agents_hooks_is_checked_as_a_new_grant_of_the_whole_lifecycle(
        webhook: httpx.AsyncClient, ns: str) -> None:
    """Before, only a change of the rules was checked: replacing a hook's command under unchanged rules handed the
    rules (and the hook's Secrets) to whoever edited it."""
    old = agent("a", lifecycle=LIFECYCLE, systemPrompt="be brief")
    old["metadata"]["annotations"] = {"agentrun.dev/author": "owner", "agentrun.dev/author-groups": "[]"}
    for change in (lambda d: d["lifecycle"]["postRun"][0].update(command=["sh", "-c", "curl evil"]),
                   lambda d: d["lifecycle"]["postRun"][0].update(image="evil"),
                   lambda d: d["lifecycle"]["postRun"].append({"name": "more", "image": "busybox"}),
                   lambda d: d["lifecycle"]["postRun"].clear(),
                   lambda d: d["lifecycle"]["postRun"][0].update(env=[{"name": "X", "value": "1"}])):
        new = copy.deepcopy(old)
        change(new["spec"]["agents"]["default"])
        refused(await admit(webhook, request(ns, "agents", as_written(new, "runner"), "runner", op="UPDATE", old=old)),
                'spec.agents.default.lifecycle.rbac[0]: "runner" may not grant get configmaps')
        assert (await admit(webhook, request(ns, "agents", as_written(new, "owner"), "owner", op="UPDATE",
                                             old=old)))["allowed"] is True
    # What grants nothing may be edited by anyone allowed to edit the Agent, keeping its author...
    prompt = copy.deepcopy(old)
    prompt["spec"]["agents"]["default"]["model"] = "other"
    assert (await admit(webhook, request(ns, "agents", prompt, "runner", op="UPDATE", old=old)))["allowed"] is True
    # ...but not the author stamp itself.
    claimed = copy.deepcopy(prompt)
    claimed["metadata"]["annotations"]["agentrun.dev/author"] = "runner"
    refused(await admit(webhook, request(ns, "agents", claimed, "runner", op="UPDATE", old=old)),
            "agentrun.dev/author and agentrun.dev/author-groups record who wrote what this Agent grants")


async def mutations(webhook: httpx.AsyncClient, body: dict[str, Any]) -> dict[str, str]:
    r = await webhook.post("/admission/authors/mutate", json=body)
    assert r.status_code == 200, r.text
    resp = r.json()["response"]
    assert resp["allowed"] is True
    if "patch" not in resp:
        return {}
    ops = json.loads(base64.b64decode(resp["patch"]))
    return {op["path"].rsplit("/", 1)[1].replace("~1", "/"): op["value"] for op in ops if op["path"].count("/") > 2}


async def test_the_author_is_stamped_on_creation_and_on_every_change_of_what_is_granted(
        webhook: httpx.AsyncClient, ns: str) -> None:
    body = agent("a", lifecycle=LIFECYCLE)
    assert await mutations(webhook, request(ns, "agents", body, "owner")) == {
        "agentrun.dev/author": "owner", "agentrun.dev/author-groups": '["system:authenticated"]'}
    stamped = copy.deepcopy(body)
    stamped["metadata"]["annotations"] = {"agentrun.dev/author": "owner",
                                          "agentrun.dev/author-groups": '["system:authenticated"]'}
    model = copy.deepcopy(stamped)
    model["spec"]["agents"]["default"]["model"] = "other"
    assert await mutations(webhook, request(ns, "agents", model, "runner", op="UPDATE", old=stamped)) == {}
    hook = copy.deepcopy(stamped)
    hook["spec"]["agents"]["default"]["lifecycle"]["postRun"][0]["command"] = ["true"]
    assert (await mutations(webhook, request(ns, "agents", hook, "ops", op="UPDATE", old=stamped)))[
        "agentrun.dev/author"] == "ops"
    # The bridge's Agents carry their pack's author, or the empty stamp for a pack that records none (the bridge is
    # nobody's author, so such an Agent's gate hook cannot decide under approvers); a user's claim is replaced.
    assert await mutations(webhook, request(ns, "agents", stamped, "the-bridge")) == {}
    unknown = {**body, "metadata": {**body["metadata"], "annotations": {"agentrun.dev/author": ""}}}
    assert await mutations(webhook, request(ns, "agents", unknown, "the-bridge")) == {}
    assert (await admit(webhook, request(ns, "agents", unknown, "the-bridge")))["status"]["message"].startswith(
        'spec.agents.default.lifecycle.rbac[0]: "the-bridge" may not grant'), "checked as the bridge itself"
    assert (await mutations(webhook, request(ns, "agents", body, "the-bridge")))["agentrun.dev/author"] == "the-bridge"
    assert (await mutations(webhook, request(ns, "agents", stamped, "runner")))["agentrun.dev/author"] == "runner"
    schedule = _obj("SympoziumSchedule", "s", {"agentRef": "hooked", "schedule": "@daily", "task": "t"})
    assert (await mutations(webhook, request(ns, "sympoziumschedules", schedule, "runner")))[
        "agentrun.dev/author"] == "runner"
    paused = {**schedule, "spec": {**schedule["spec"], "suspend": True}}
    assert await mutations(webhook, request(ns, "sympoziumschedules", paused, "ops", op="UPDATE",
                                            old=schedule)) == {}


async def test_an_agent_stamped_from_a_pack_is_checked_as_the_packs_author(webhook: httpx.AsyncClient,
                                                                          ns: str) -> None:
    """Before, an Ensemble's stamped Agent was checked as the bridge."""
    def stamped(author: str) -> dict[str, Any]:
        body = agent("team-lead", lifecycle=LIFECYCLE)
        body["metadata"]["annotations"] = {"agentrun.dev/author": author, "agentrun.dev/author-groups": "[]"}
        return body

    assert (await admit(webhook, request(ns, "agents", stamped("owner"), "the-bridge")))["allowed"] is True
    refused(await admit(webhook, request(ns, "agents", stamped("runner"), "the-bridge")),
            'spec.agents.default.lifecycle.rbac[0]: "runner" may not grant get configmaps')
    # Re-carrying another author onto an unchanged Agent is checked as that author too.
    refused(await admit(webhook, request(ns, "agents", stamped("runner"), "the-bridge", op="UPDATE",
                                         old=stamped("owner"))),
            'spec.agents.default.lifecycle.rbac[0]: "runner" may not grant')


# -- SkillPacks, packs and schedules (hole 3) -----------------------------------------------------------------------

def skill_pack(**sidecar: Any) -> dict[str, Any]:
    return _obj("SkillPack", "tools", {"skills": [{"name": "s", "content": "c"}],
                                       "sidecar": {"image": "tools:1", **sidecar}})


async def test_a_skill_packs_sidecar_rules_and_secrets_are_checked_against_its_writer(
        webhook: httpx.AsyncClient, ns: str) -> None:
    """Before, the definitions webhook only warned: anyone allowed to write a SkillPack chose its sidecar's rights."""
    rbac = {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}
    assert (await admit(webhook, request(ns, "skillpacks", skill_pack(rbac=[rbac]), "owner")))["allowed"] is True
    refused(await admit(webhook, request(ns, "skillpacks", skill_pack(rbac=[rbac]), "runner")),
            f'spec.sidecar.rbac[0]: "runner" may not grant get configmaps in namespace "{ns}"')
    cluster = skill_pack(clusterRBAC=[LIST_NODES])
    message = refused(await admit(webhook, request(ns, "skillpacks", cluster, "owner")),
                      'spec.sidecar.clusterRBAC[0]: "owner" may not grant list nodes cluster-wide (a ClusterRole)')
    assert message
    assert (await admit(webhook, request(ns, "skillpacks", cluster, "ops")))["allowed"] is True
    refused(await admit(webhook, request(ns, "skillpacks", skill_pack(env=[secret_env("db")]), "ops")),
            'spec.sidecar.env[0].valueFrom.secretKeyRef.name: "ops" may not get Secret "db"')
    refused(await admit(webhook, request(ns, "skillpacks", skill_pack(secretRef="db"), "runner")),
            'spec.sidecar.secretRef: "runner" may not get Secret "db"')
    # A change of the skills' text grants nothing and is not checked.
    old = skill_pack(rbac=[rbac])
    new = copy.deepcopy(old)
    new["spec"]["skills"][0]["content"] = "other"
    assert (await admit(webhook, request(ns, "skillpacks", new, "runner", op="UPDATE", old=old)))["allowed"] is True


async def test_a_packs_personas_lifecycles_and_secrets_are_checked_against_its_writer(
        webhook: httpx.AsyncClient, ns: str) -> None:
    persona = {"name": "lead", "systemPrompt": "lead", "lifecycle": {"rbac": [READ_CM]}}
    ensemble = _obj("Ensemble", "team", {"agentConfigs": [persona]})
    assert (await admit(webhook, request(ns, "ensembles", ensemble, "owner")))["allowed"] is True
    refused(await admit(webhook, request(ns, "ensembles", ensemble, "runner")),
            'spec.agentConfigs[0].lifecycle.rbac[0]: "runner" may not grant get configmaps')
    keyed = _obj("Ensemble", "team", {"agentConfigs": [{"name": "lead", "systemPrompt": "lead"}],
                                      "authRefs": [{"provider": "openai", "secret": "team-key"}],
                                      "channelConfigs": {"slack": "slack-bot"}})
    refused(await admit(webhook, request(ns, "ensembles", keyed, "owner")),
            'spec.channelConfigs.slack: "owner" may not get Secret "slack-bot"')
    pack = _obj("PersonaPack", "team", {"personas": [persona]})
    refused(await admit(webhook, request(ns, "personapacks", pack, "runner")),
            'spec.personas[0].lifecycle.rbac[0]: "runner" may not grant get configmaps')
    # Enabling or pausing a pack grants nothing.
    enabled = {**pack, "spec": {**pack["spec"], "enabled": True}}
    assert (await admit(webhook, request(ns, "personapacks", enabled, "runner", op="UPDATE", old=pack)))["allowed"]


async def test_a_schedules_author_must_hold_what_its_runs_inherit(webhook: httpx.AsyncClient, ns: str) -> None:
    """A tick's run is created by the worker in its schedule's author's name: the author must hold the lifecycle
    rules of its Agent, as when creating such a run by hand (before, the tick was checked as the worker)."""
    schedule = _obj("SympoziumSchedule", "nightly", {"agentRef": "hooked", "schedule": "@daily", "task": "t"})
    assert (await admit(webhook, request(ns, "sympoziumschedules", schedule, "owner")))["allowed"] is True
    refused(await admit(webhook, request(ns, "sympoziumschedules", schedule, "runner")),
            'spec.agentRef (its runs inherit Agent "hooked" spec.agents.default.lifecycle.rbac[0]): "runner" may not '
            "grant get configmaps")
    carried = copy.deepcopy(schedule)
    carried["metadata"]["annotations"] = {"agentrun.dev/author": "runner"}
    refused(await admit(webhook, request(ns, "sympoziumschedules", carried, "the-api")), 'spec.agentRef (its runs')
    missing = _obj("SympoziumSchedule", "later", {"agentRef": "not-yet", "schedule": "@daily", "task": "t"})
    assert (await admit(webhook, request(ns, "sympoziumschedules", missing, "runner")))["allowed"] is True
