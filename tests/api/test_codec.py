"""The codec server's routes in Temporal's codec-server protocol: 401 without the API's token (or its login cookie),
encode/decode with it, plain payloads passed through, an undecryptable payload a 400 naming why, and CORS for the
Temporal UI's origin on these routes only (the whole stack: tests/e2e/test_codec.py)."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client, config
from pydantic import ValidationError
from temporalio.contrib.pydantic import pydantic_data_converter

from api.codec import COOKIE
from api.main import State, create_app
from api.settings import ApiSettings
from cli.roles import bind, ensure_roles, user
from localkube.testing import Handle
from models.codec import new_key_line
from models.roles import VIEWER

TOKEN = "t-codec-0123456789"
UI = "http://127.0.0.1:8233"
SECRET = "s3cr3t-XYZ-codec"


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    path = tmp_path / "codec-keys"
    path.write_text(new_key_line("k2") + "\n" + new_key_line("k1") + "\n")
    return path


def _settings(tmp_path: Path, keys: Path) -> ApiSettings:
    tokens = tmp_path / "tokens"
    tokens.write_text(f"{TOKEN} operator@example.com\n")
    return ApiSettings(token_file=str(tokens), codec_cors_origins=[UI],
                       temporal={"codec_keys_file": str(keys)})


@pytest.fixture(scope="module")
def kube(localkube: Handle) -> Iterator[client.ApiClient]:
    """The session's localkube, where the operator may read runs in every namespace: the codec shows any history
    (api/access.py), and asks Kubernetes RBAC for the caller, and the cluster for a token not in the file."""
    api = config.new_client_from_config(str(localkube.kubeconfig))
    ensure_roles(api)
    bind(api, "codec-operator", [user("operator@example.com")], (VIEWER,))
    yield api
    api.close()


@pytest.fixture
async def api(tmp_path: Path, keys: Path, kube: client.ApiClient) -> AsyncIterator[httpx.AsyncClient]:
    settings = _settings(tmp_path, keys)
    app = create_app(settings)
    # No lifespan (it would connect to Temporal, which the codec routes never call).
    app.state.agentrun = State(settings, kube, None, app.state.auth)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://api") as c:
        yield c


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def _plain(value: Any) -> dict[str, Any]:
    p = pydantic_data_converter.payload_converter.to_payloads([value])[0]
    return {"metadata": {k: base64.b64encode(v).decode() for k, v in p.metadata.items()},
            "data": base64.b64encode(p.data).decode()}


def _value(payload: dict[str, Any]) -> Any:
    assert base64.b64decode(payload["metadata"]["encoding"]) == b"json/plain"
    return json.loads(base64.b64decode(payload["data"]))


@pytest.mark.parametrize("route", ["/codec/encode", "/codec/decode"])
async def test_the_codec_routes_answer_401_without_a_valid_token(api: httpx.AsyncClient, route: str) -> None:
    body = {"payloads": [_plain(SECRET)]}
    missing = await api.post(route, json=body)
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    wrong = await api.post(route, json=body, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401 and wrong.json()["detail"] == "invalid token"
    assert SECRET not in missing.text + wrong.text


async def test_encode_then_decode_round_trips_and_plain_payloads_pass_through(api: httpx.AsyncClient) -> None:
    enc = await api.post("/codec/encode", json={"payloads": [_plain({"value": SECRET}), _plain("two")]}, headers=AUTH)
    assert enc.status_code == 200, enc.text
    sealed = enc.json()["payloads"]
    assert [base64.b64decode(p["metadata"]["encryption-key-id"]) for p in sealed] == [b"k2", b"k2"]
    assert all(base64.b64decode(p["metadata"]["encoding"]) == b"binary/encrypted" for p in sealed)
    assert SECRET not in enc.text and SECRET.encode() not in base64.b64decode(sealed[0]["data"])
    dec = await api.post("/codec/decode", json={"payloads": [*sealed, _plain("as is")]},
                         headers={**AUTH, "X-Namespace": "default"})
    assert dec.status_code == 200, dec.text
    assert [_value(p) for p in dec.json()["payloads"]] == [{"value": SECRET}, "two", "as is"]
    empty = await api.post("/codec/decode", json={"payloads": []}, headers=AUTH)
    assert empty.status_code == 200 and empty.json() == {"payloads": []}


async def test_an_undecryptable_payload_is_a_400_saying_why(api: httpx.AsyncClient) -> None:
    sealed = (await api.post("/codec/encode", json={"payloads": [_plain(SECRET)]}, headers=AUTH)).json()["payloads"]
    unknown = {"metadata": {**sealed[0]["metadata"], "encryption-key-id": base64.b64encode(b"retired").decode()},
               "data": sealed[0]["data"]}
    r = await api.post("/codec/decode", json={"payloads": [unknown]}, headers=AUTH)
    assert r.status_code == 400 and "payload encrypted with key 'retired', which is not among" in r.json()["detail"]
    data = bytearray(base64.b64decode(sealed[0]["data"]))
    data[-1] ^= 1
    altered = {"metadata": sealed[0]["metadata"], "data": base64.b64encode(bytes(data)).decode()}
    r = await api.post("/codec/decode", json={"payloads": [altered]}, headers=AUTH)
    assert r.status_code == 400 and "fails authentication" in r.json()["detail"]
    for bad in (b"not json", b'{"payloads": [{"data": "%%%"}]}', b'{"payloads": 3}'):
        r = await api.post("/codec/decode", content=bad, headers={**AUTH, "Content-Type": "application/json"})
        assert r.status_code == 400 and r.json()["detail"].startswith('body is not {"payloads"'), r.text


async def test_the_temporal_ui_origin_may_call_the_codec_routes_and_no_others(api: httpx.AsyncClient) -> None:
    preflight = {"Origin": UI, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "authorization,content-type,x-namespace"}
    ok = await api.options("/codec/decode", headers=preflight)
    assert ok.status_code == 200
    assert ok.headers["access-control-allow-origin"] == UI
    assert ok.headers["access-control-allow-credentials"] == "true"
    assert "POST" in ok.headers["access-control-allow-methods"]
    assert {"authorization", "content-type", "x-namespace"} <= set(
        ok.headers["access-control-allow-headers"].lower().replace(" ", "").split(","))
    other = await api.options("/codec/decode", headers={**preflight, "Origin": "http://evil.example"})
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    # The rest of the API answers no cross-origin request, even from the UI's origin.
    runs = await api.options("/api/v1/runs", headers=preflight)
    assert "access-control-allow-origin" not in runs.headers
    post = await api.post("/codec/encode", json={"payloads": []}, headers={**AUTH, "Origin": UI})
    assert post.status_code == 200 and post.headers["access-control-allow-origin"] == UI
    refused = await api.post("/codec/encode", json={"payloads": []}, headers={"Origin": UI})
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == UI


async def test_the_login_cookie_authenticates_the_codec_routes_only(api: httpx.AsyncClient) -> None:
    page = await api.get("/codec/login")
    assert page.status_code == 200 and 'name=token' in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    bad = await api.post("/codec/login", content=b"token=nope",
                         headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert bad.status_code == 401 and COOKIE not in bad.cookies
    good = await api.post("/codec/login", content=f"token={TOKEN}".encode(),
                          headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert good.status_code == 200 and "Signed in as operator@example.com" in good.text
    cookie = good.headers["set-cookie"]
    assert f"{COOKIE}={TOKEN}" in cookie and "HttpOnly" in cookie and "Path=/codec" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    sealed = await api.post("/codec/encode", json={"payloads": [_plain(SECRET)]})
    assert sealed.status_code == 200, sealed.text  # the client kept the cookie
    dec = await api.post("/codec/decode", json=sealed.json())
    assert [_value(p) for p in dec.json()["payloads"]] == [SECRET]
    assert (await api.get("/api/v1/runs")).status_code == 401  # the cookie is no bearer token for the rest
    out = await api.post("/codec/logout")
    assert out.status_code == 200
    assert (await api.post("/codec/decode", json=sealed.json())).status_code == 401


def test_an_origin_with_a_wildcard_or_a_path_is_refused() -> None:
    for origin in ("*", "http://ui.example/path", "ui.example"):
        with pytest.raises(ValidationError, match="is not an origin"):
            ApiSettings(codec_cors_origins=[origin])


def test_the_api_refuses_to_start_with_a_bad_key_file(tmp_path: Path) -> None:
    keys = tmp_path / "bad-keys"
    keys.write_text("k1 c2hvcnQ=\n")
    with pytest.raises(ValueError, match=f"AGENTRUN_TEMPORAL__CODEC_KEYS_FILE={keys}, line 1: the key of 'k1' is 5"):
        create_app(_settings(tmp_path, keys))
