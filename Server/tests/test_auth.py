from __future__ import annotations

import re

from fastapi.routing import APIRoute

from symorva_server.auth import PUBLIC_PATHS

from .conftest import SERVER_NAME, assert_error, login


def test_exchange_and_whoami(client, verifier):
    session = login(client, verifier, "@alice:localhost")
    assert session["user_id"] == "@alice:localhost"
    assert session["token_type"] == "Bearer"
    assert session["expires_in_ms"] == 3600 * 1000
    assert session["access_token"].startswith("sy_")
    r = client.get("/_symorva/v1/whoami", headers=session["headers"])
    assert r.status_code == 200
    assert r.json() == {"user_id": "@alice:localhost", "expires_in_ms": 3600 * 1000}


def test_each_exchange_gives_a_new_token(client, verifier):
    a = login(client, verifier)
    b = login(client, verifier)
    assert a["access_token"] != b["access_token"]
    for s in (a, b):
        assert client.get("/_symorva/v1/whoami", headers=s["headers"]).status_code == 200


def test_missing_token(client):
    r = client.get("/_symorva/v1/whoami")
    assert_error(r, 401, "SY_MISSING_TOKEN")
    assert r.headers["www-authenticate"].startswith("Bearer")


def test_wrong_scheme_is_treated_as_unknown(client):
    r = client.get("/_symorva/v1/whoami", headers={"Authorization": "Basic YWxhZGRpbjpvcGVu"})
    assert_error(r, 401, "SY_UNKNOWN_TOKEN")


def test_forged_token(client, verifier):
    login(client, verifier)
    r = client.get("/_symorva/v1/whoami", headers={"Authorization": "Bearer sy_forgedforgedforged"})
    body = assert_error(r, 401, "SY_UNKNOWN_TOKEN")
    assert "Unknown" in body["error"]


def test_expired_token(client, verifier, clock):
    session = login(client, verifier)
    clock.advance(3600 - 1)
    r = client.get("/_symorva/v1/whoami", headers=session["headers"])
    assert r.status_code == 200
    assert r.json()["expires_in_ms"] == 1000
    clock.advance(1)
    r = client.get("/_symorva/v1/whoami", headers=session["headers"])
    body = assert_error(r, 401, "SY_UNKNOWN_TOKEN")
    assert "expired" in body["error"]


def test_custom_token_lifetime(make_client, verifier, clock):
    c = make_client(token_lifetime_s=5)
    session = login(c, verifier)
    assert session["expires_in_ms"] == 5000
    clock.advance(5)
    assert_error(c.get("/_symorva/v1/whoami", headers=session["headers"]), 401, "SY_UNKNOWN_TOKEN")


def test_openid_token_rejected_by_homeserver(client, verifier):
    r = client.post("/_symorva/v1/auth/openid",
                    json={"access_token": "not-a-real-token", "matrix_server_name": SERVER_NAME})
    assert_error(r, 401, "SY_UNKNOWN_TOKEN")
    assert verifier.calls == ["not-a-real-token"]


def test_foreign_server_name_is_rejected_without_asking_homeserver(client, verifier):
    token = verifier.issue("@mallory:evil.example")
    r = client.post("/_symorva/v1/auth/openid",
                    json={"access_token": token, "matrix_server_name": "evil.example"})
    body = assert_error(r, 401, "SY_FORBIDDEN")
    assert "evil.example" in body["error"]
    assert verifier.calls == []


def test_foreign_user_behind_our_server_name_is_rejected(client, verifier):
    # The homeserver vouches for a user of another server: must not be accepted.
    token = verifier.issue("@mallory:evil.example")
    r = client.post("/_symorva/v1/auth/openid",
                    json={"access_token": token, "matrix_server_name": SERVER_NAME})
    assert_error(r, 401, "SY_FORBIDDEN")


def test_homeserver_unavailable(client, verifier):
    verifier.unavailable = True
    token = verifier.issue("@alice:localhost")
    r = client.post("/_symorva/v1/auth/openid",
                    json={"access_token": token, "matrix_server_name": SERVER_NAME})
    assert_error(r, 502, "SY_HOMESERVER_UNAVAILABLE")


def test_exchange_validation(client):
    assert_error(client.post("/_symorva/v1/auth/openid", json={"matrix_server_name": SERVER_NAME}),
                 400, "SY_MISSING_PARAM")
    assert_error(client.post("/_symorva/v1/auth/openid",
                             json={"access_token": 12, "matrix_server_name": SERVER_NAME}),
                 400, "SY_INVALID_PARAM")
    assert_error(client.post("/_symorva/v1/auth/openid",
                             json={"access_token": "", "matrix_server_name": SERVER_NAME}),
                 400, "SY_INVALID_PARAM")


def _app_operations(app) -> list[tuple[str, str]]:
    """(method, concrete path) of every route the app has, path parameters filled in. Routers
    are included without a prefix; FastAPI >= 0.16x wraps each included router in a route
    holding `original_router`."""
    def walk(routes):
        for route in routes:
            included = getattr(route, "original_router", None)
            if included is not None:
                yield from walk(included.routes)
            elif isinstance(route, APIRoute):
                yield route

    ops = []
    for route in walk(app.routes):
        path = re.sub(r"\{[^}]+\}", "x", route.path)
        ops.extend((method, path) for method in sorted(route.methods))
    # The walk misses nothing the OpenAPI document (made from the same routes) has.
    documented = {(m.upper(), re.sub(r"\{[^}]+\}", "x", p)) for p, o in app.openapi()["paths"].items() for m in o}
    assert documented <= set(ops), documented - set(ops)
    return ops


def test_no_endpoint_answers_without_token(test_client):
    # Everything except health, discovery, the exchange itself and the Push Gateway API (the
    # homeserver calls it) needs a token: every route
    # of the app (test endpoints included), unknown paths and FastAPI's own pages.
    ops = _app_operations(test_client.app)
    assert ("POST", "/_symorva/v1/wallet/transfers/confirm") in ops and ("GET", "/_symorva/v1/test/faults") in ops
    public = [(m, p) for m, p in ops if p in PUBLIC_PATHS]
    assert sorted(public) == [("GET", "/.well-known/symorva"), ("GET", "/_symorva/v1/health"),
                              ("POST", "/_matrix/push/v1/notify"), ("POST", "/_symorva/v1/auth/openid")]
    protected = [(m, p) for m, p in ops if p not in PUBLIC_PATHS]
    assert len(protected) >= 10
    for method, path in protected + [("GET", "/_symorva/v1/nope"), ("GET", "/docs"), ("GET", "/openapi.json")]:
        r = test_client.request(method, path, content=b"{not json")
        assert r.status_code == 401, (method, path, r.status_code)
        assert_error(r, 401, "SY_MISSING_TOKEN")
    assert test_client.get("/_symorva/v1/health").status_code == 200
    assert test_client.get("/.well-known/symorva").status_code == 200


# ----------------------------------------------------------------------------- sign-out


def _exchange(client, verifier, user_id="@alice:localhost", device_id=None, identity_device=None):
    token = verifier.issue(user_id)
    if identity_device is not None:
        verifier.devices[token] = identity_device
    body = {"access_token": token, "matrix_server_name": SERVER_NAME}
    if device_id is not None:
        body["device_id"] = device_id
    r = client.post("/_symorva/v1/auth/openid", json=body)
    assert r.status_code == 200, r.text
    return {"Authorization": f"Bearer {r.json()['access_token']}"}


def _whoami(client, headers) -> int:
    return client.get("/_symorva/v1/whoami", headers=headers).status_code


def test_logout_revokes_the_token_and_the_devices_other_tokens(client, verifier):
    phone1, phone2 = _exchange(client, verifier, device_id="PHONE"), _exchange(client, verifier, device_id="PHONE")
    laptop = _exchange(client, verifier, device_id="LAPTOP")
    bob = _exchange(client, verifier, "@bob:localhost", device_id="PHONE")
    r = client.post("/_symorva/v1/auth/logout", headers=phone1)
    assert r.status_code == 200 and r.json() == {"revoked": 2}
    body = assert_error(client.get("/_symorva/v1/whoami", headers=phone1), 401, "SY_UNKNOWN_TOKEN")
    assert "Unknown" in body["error"]
    assert _whoami(client, phone2) == 401
    assert _whoami(client, laptop) == 200 and _whoami(client, bob) == 200
    assert_error(client.post("/_symorva/v1/auth/logout", headers=phone1), 401, "SY_UNKNOWN_TOKEN")


def test_logout_without_a_device_revokes_only_that_token_and_all_devices_everything(client, verifier):
    a, b = _exchange(client, verifier), _exchange(client, verifier)
    laptop = _exchange(client, verifier, device_id="LAPTOP")
    assert client.post("/_symorva/v1/auth/logout", headers=a, json={}).json() == {"revoked": 1}
    assert (_whoami(client, a), _whoami(client, b), _whoami(client, laptop)) == (401, 200, 200)
    bob = _exchange(client, verifier, "@bob:localhost")
    assert client.post("/_symorva/v1/auth/logout", headers=b, json={"all_devices": True}).json() == {"revoked": 2}
    assert (_whoami(client, b), _whoami(client, laptop), _whoami(client, bob)) == (401, 401, 200)


def test_logout_validation(client, verifier):
    s = _exchange(client, verifier)
    assert_error(client.post("/_symorva/v1/auth/logout", headers=s, json={"all_devices": "yes"}), 400,
                 "SY_INVALID_PARAM")
    assert_error(client.post("/_symorva/v1/auth/logout", headers=s, json={"everything": True}), 400,
                 "SY_INVALID_PARAM")
    assert_error(client.post("/_symorva/v1/auth/logout"), 401, "SY_MISSING_TOKEN")
    assert _whoami(client, s) == 200


def test_a_device_the_homeserver_names_binds_the_token(client, verifier):
    # The Matrix spec's userinfo (and Synapse) name no device; a homeserver that does wins.
    phone = _exchange(client, verifier, identity_device="PHONE")
    declared = _exchange(client, verifier, device_id="PHONE", identity_device="PHONE")
    token = verifier.issue("@alice:localhost")
    verifier.devices[token] = "PHONE"
    r = client.post("/_symorva/v1/auth/openid",
                    json={"access_token": token, "matrix_server_name": SERVER_NAME, "device_id": "LAPTOP"})
    assert_error(r, 401, "SY_FORBIDDEN")
    assert client.post("/_symorva/v1/auth/logout", headers=phone).json() == {"revoked": 2}
    assert _whoami(client, declared) == 401
