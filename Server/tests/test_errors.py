from __future__ import annotations

from .conftest import SERVER_NAME, assert_error, login


def test_unknown_endpoint_is_json_404(client, verifier):
    s = login(client, verifier)
    body = assert_error(client.get("/_symorva/v1/nope", headers=s["headers"]), 404, "SY_NOT_FOUND")
    assert "/_symorva/v1/nope" in body["error"]


def test_wrong_method_is_json_405(client, verifier):
    s = login(client, verifier)
    assert_error(client.delete("/_symorva/v1/whoami", headers=s["headers"]), 405, "SY_METHOD_NOT_ALLOWED")
    assert_error(client.get("/_symorva/v1/auth/openid"), 405, "SY_METHOD_NOT_ALLOWED")


def test_bad_json(client):
    r = client.post("/_symorva/v1/auth/openid", content=b'{"access_token": ',
                    headers={"content-type": "application/json"})
    assert_error(r, 400, "SY_BAD_JSON")


def test_json_that_is_not_an_object(client):
    r = client.post("/_symorva/v1/auth/openid", json=["access_token"])
    assert_error(r, 400, "SY_BAD_JSON")


def test_missing_body(client):
    assert_error(client.post("/_symorva/v1/auth/openid"), 400, "SY_BAD_JSON")


def test_body_size_limit(client):
    big = {"access_token": "x" * (70 * 1024), "matrix_server_name": SERVER_NAME}
    body = assert_error(client.post("/_symorva/v1/auth/openid", json=big), 413, "SY_TOO_LARGE")
    assert "65536" in body["error"]


def test_body_size_limit_chunked(client):
    def gen():
        for _ in range(80):
            yield b"x" * 1024

    r = client.post("/_symorva/v1/auth/openid", content=gen(),
                    headers={"content-type": "application/json"})
    assert "content-length" not in {k.lower() for k in r.request.headers}
    assert_error(r, 413, "SY_TOO_LARGE")


def test_body_just_under_limit_is_processed(client):
    # 64 KiB exactly is allowed; it fails validation (token too long), not the limit.
    payload = b'{"matrix_server_name": "localhost", "access_token": "' 
    pad = 64 * 1024 - len(payload) - 2
    r = client.post("/_symorva/v1/auth/openid", content=payload + b"x" * pad + b'"}',
                    headers={"content-type": "application/json"})
    assert_error(r, 400, "SY_INVALID_PARAM")


def test_unexpected_exception_is_json_500(make_client, verifier):
    c = make_client()
    c.app.state.ctx.verifier = None  # breaks the exchange handler
    c = type(c)(c.app, raise_server_exceptions=False)
    r = c.post("/_symorva/v1/auth/openid",
               json={"access_token": "t", "matrix_server_name": SERVER_NAME})
    assert_error(r, 500, "SY_UNKNOWN")


def test_wrong_content_type_is_explained(client):
    r = client.post("/_symorva/v1/auth/openid", content=b'{"access_token": "a", "matrix_server_name": "localhost"}',
                    headers={"content-type": "application/x-www-form-urlencoded"})
    body = assert_error(r, 400, "SY_BAD_JSON")
    assert "Content-Type: application/json" in body["error"]


def test_json_without_content_type_is_explained(client, verifier):
    token = verifier.issue("@bob:localhost")
    r = client.post("/_symorva/v1/auth/openid",
                    content=('{"access_token": "%s", "matrix_server_name": "localhost"}' % token).encode())
    body = assert_error(r, 400, "SY_BAD_JSON")
    assert "Content-Type: application/json (got none)" in body["error"]
