from __future__ import annotations

import time

import pytest

from symorva_server.faults import ConnectionDropped

from .conftest import assert_error, login

FAULTS = "/_symorva/v1/test/faults"


def test_test_routes_absent_without_test_flag(client, verifier):
    s = login(client, verifier)
    assert client.get("/_symorva/v1/health").json()["test_mode"] is False
    for method, path in [("POST", FAULTS), ("GET", FAULTS), ("DELETE", FAULTS),
                         ("PUT", "/_symorva/v1/test/kv/a"), ("GET", "/_symorva/v1/test/kv/a")]:
        r = client.request(method, path, headers=s["headers"], json={"value": 1})
        assert_error(r, 404, "SY_NOT_FOUND")


def test_fault_validation(test_client, verifier):
    s = login(test_client, verifier)
    for bad in [{"path_prefix": "no-slash", "mode": "delay"},
                {"path_prefix": "/x", "mode": "explode"},
                {"path_prefix": "/x", "mode": "error5xx", "status": 404},
                {"path_prefix": "/x", "mode": "delay", "count": 0},
                {"path_prefix": "/x", "mode": "delay", "surprise": 1}]:
        assert_error(test_client.post(FAULTS, json=bad, headers=s["headers"]), 400, "SY_INVALID_PARAM")
    assert_error(test_client.post(FAULTS, json={"mode": "delay"}, headers=s["headers"]), 400, "SY_MISSING_PARAM")


def test_error5xx_for_count_requests(test_client, verifier):
    s = login(test_client, verifier)
    r = test_client.post(FAULTS, headers=s["headers"], json={
        "path_prefix": "/_symorva/v1/whoami", "mode": "error5xx", "count": 2,
        "status": 502, "retry_after_ms": 1500})
    assert r.status_code == 200, r.text
    fault = r.json()
    assert fault["remaining"] == 2 and fault["mode"] == "error5xx"
    for _ in range(2):
        body = assert_error(test_client.get("/_symorva/v1/whoami", headers=s["headers"]),
                            502, "SY_INJECTED_FAULT")
        assert body["retry_after_ms"] == 1500
    assert test_client.get("/_symorva/v1/whoami", headers=s["headers"]).status_code == 200
    assert test_client.get(FAULTS, headers=s["headers"]).json() == {"faults": []}


def test_method_filter_and_unlimited_count_and_clear(test_client, verifier):
    s = login(test_client, verifier)
    test_client.post(FAULTS, headers=s["headers"], json={
        "path_prefix": "/_symorva/v1/test/kv/", "mode": "error5xx", "method": "put", "count": None})
    for _ in range(3):
        assert_error(test_client.put("/_symorva/v1/test/kv/k", json={"value": 1}, headers=s["headers"]),
                     503, "SY_INJECTED_FAULT")
    assert_error(test_client.get("/_symorva/v1/test/kv/k", headers=s["headers"]), 404, "SY_NOT_FOUND")
    listed = test_client.get(FAULTS, headers=s["headers"]).json()["faults"]
    assert len(listed) == 1 and listed[0]["hits"] == 3 and listed[0]["remaining"] is None
    assert test_client.delete(FAULTS, headers=s["headers"]).json() == {"cleared": 1}
    assert test_client.put("/_symorva/v1/test/kv/k", json={"value": 1}, headers=s["headers"]).status_code == 200


def test_remove_single_fault(test_client, verifier):
    s = login(test_client, verifier)
    fid = test_client.post(FAULTS, headers=s["headers"],
                           json={"path_prefix": "/a", "mode": "drop"}).json()["fault_id"]
    assert test_client.delete(f"{FAULTS}/{fid}", headers=s["headers"]).json() == {"cleared": 1}
    assert_error(test_client.delete(f"{FAULTS}/{fid}", headers=s["headers"]), 404, "SY_NOT_FOUND")


def test_faults_path_itself_is_never_faulted(test_client, verifier):
    s = login(test_client, verifier)
    test_client.post(FAULTS, headers=s["headers"],
                     json={"path_prefix": "/", "mode": "error5xx", "count": None})
    assert test_client.get(FAULTS, headers=s["headers"]).status_code == 200
    assert test_client.delete(FAULTS, headers=s["headers"]).status_code == 200


def test_delay(test_client, verifier):
    s = login(test_client, verifier)
    test_client.post(FAULTS, headers=s["headers"],
                     json={"path_prefix": "/_symorva/v1/whoami", "mode": "delay", "delay_ms": 300})
    t0 = time.monotonic()
    assert test_client.get("/_symorva/v1/whoami", headers=s["headers"]).status_code == 200
    assert time.monotonic() - t0 >= 0.3
    t0 = time.monotonic()
    assert test_client.get("/_symorva/v1/whoami", headers=s["headers"]).status_code == 200
    assert time.monotonic() - t0 < 0.3


def test_commit_then_drop_in_process(test_client, verifier):
    # In-process there is no socket to close: the drop surfaces as ConnectionDropped.
    # The real-socket behaviour is covered by test_server_process.py.
    s = login(test_client, verifier)
    test_client.post(FAULTS, headers=s["headers"],
                     json={"path_prefix": "/_symorva/v1/test/kv/", "mode": "commit_then_drop"})
    with pytest.raises(ConnectionDropped):
        test_client.put("/_symorva/v1/test/kv/once", json={"value": "v"}, headers=s["headers"])
    r = test_client.get("/_symorva/v1/test/kv/once", headers=s["headers"])
    assert r.json() == {"key": "once", "value": "v", "writes": 1}


def test_drop_does_not_run_handler(test_client, verifier):
    s = login(test_client, verifier)
    test_client.post(FAULTS, headers=s["headers"],
                     json={"path_prefix": "/_symorva/v1/test/kv/", "mode": "drop", "method": "PUT"})
    with pytest.raises(ConnectionDropped):
        test_client.put("/_symorva/v1/test/kv/never", json={"value": "v"}, headers=s["headers"])
    assert_error(test_client.get("/_symorva/v1/test/kv/never", headers=s["headers"]), 404, "SY_NOT_FOUND")


def test_commit_then_error5xx_runs_handler_then_answers_5xx(test_client, verifier):
    s = login(test_client, verifier)
    test_client.post(FAULTS, headers=s["headers"], json={
        "path_prefix": "/_symorva/v1/test/kv/", "mode": "commit_then_error5xx", "method": "PUT",
        "status": 500, "retry_after_ms": 2000})
    body = assert_error(test_client.put("/_symorva/v1/test/kv/c5", json={"value": 5}, headers=s["headers"]),
                        500, "SY_INJECTED_FAULT")
    assert body["retry_after_ms"] == 2000
    r = test_client.get("/_symorva/v1/test/kv/c5", headers=s["headers"])
    assert r.json() == {"key": "c5", "value": 5, "writes": 1}


def test_wait_hit_reports_when_a_fault_has_taken_a_request():
    from symorva_server.faults import FaultRegistry, FaultSpec

    registry = FaultRegistry()
    f = registry.add(FaultSpec(path_prefix="/x", mode="delay", count=1))
    assert registry.wait_hit(f.fault_id, timeout=0.01) is False
    assert registry.take("GET", "/x/y").fault_id == f.fault_id
    # Used up (no longer listed), yet its hit is still known.
    assert registry.list() == [] and registry.wait_hit(f.fault_id, timeout=0) is True
