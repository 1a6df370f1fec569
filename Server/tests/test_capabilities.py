from __future__ import annotations

import base64

from nacl.public import SealedBox, PublicKey

from symorva_server.config import default_manifest

from .conftest import HOMESERVER, SERVER_NAME, login


def test_health_and_discovery(client):
    r = client.get("/_symorva/v1/health")
    assert r.status_code == 200
    assert r.json()["status"] == "ok"
    assert r.json()["test_mode"] is False
    d = client.get("/.well-known/symorva").json()
    assert d["services"]["base_url"] == "http://127.0.0.1:9"
    assert d["services"]["api_versions"] == ["v1"]
    assert d["homeserver"] == {"base_url": HOMESERVER, "server_name": SERVER_NAME}


def test_capabilities_from_manifest(client, verifier):
    s = login(client, verifier)
    caps = client.get("/_symorva/v1/capabilities", headers=s["headers"]).json()
    assert caps["community"] == {"name": "Orbit Dev"}
    assert caps["encryption"] == {"defaultEnabled": False}
    assert caps["api_versions"] == ["v1"]
    mods = caps["modules"]
    assert set(mods) == {"meetings", "aiStudio", "wallet", "directory"}
    assert mods["meetings"] == {"enabled": True, "options": {}, "stage_capacity": 3, "host_power_level": 50,
                                "media_server": False}
    wallet = mods["wallet"]
    assert wallet["enabled"] is True
    assert wallet["options"] == {"assets": [{"code": "ORB", "precision": 2}]}
    assert wallet["verification_methods"] == ["pin"]
    assert wallet["assets"] == [{"code": "ORB", "precision": 2, "fee": "0.00"}]
    key = wallet["sealing_key"]
    assert key["algorithm"] == "x25519-xsalsa20poly1305-sealedbox"
    raw = base64.b64decode(key["public_key"])
    assert len(raw) == 32
    # A box sealed to the published key opens with the server's private key.
    sealed = SealedBox(PublicKey(raw)).encrypt(b"secret")
    assert client.app.state.ctx.sealing_key.open(sealed) == b"secret"


def test_sealing_key_is_stable_across_restarts(make_client, verifier, tmp_path):
    from fastapi.testclient import TestClient
    from symorva_server.app import create_app
    from symorva_server.config import Settings

    settings = Settings(homeserver_url=HOMESERVER, server_name=SERVER_NAME,
                        db_path=str(tmp_path / "keys.db"))
    m = default_manifest(HOMESERVER, SERVER_NAME, "http://x")
    keys = []
    for _ in range(2):
        app = create_app(settings, verifier=verifier, manifest=m)
        keys.append(app.state.ctx.sealing_key.public_key_b64)
        app.state.ctx.db.close()
    assert keys[0] == keys[1]


def test_disabled_and_unknown_modules(make_client, verifier):
    m = default_manifest(HOMESERVER, SERVER_NAME, "http://x")
    m["modules"] = {"wallet": {"enabled": False, "assets": []},
                    "polls": {"enabled": True, "maxOptions": 5}}
    c = make_client(manifest=m)
    s = login(c, verifier)
    mods = c.get("/_symorva/v1/capabilities", headers=s["headers"]).json()["modules"]
    assert mods["wallet"] == {"enabled": False, "options": {"assets": []}}
    assert mods["meetings"] == {"enabled": False, "options": {}}
    assert mods["polls"] == {"enabled": True, "options": {"maxOptions": 5}}
