from __future__ import annotations

import copy
import json

import pytest

from symorva_server.config import ManifestError, default_manifest, load_manifest, validate_manifest

BASE = default_manifest("http://127.0.0.1:8008", "localhost", "http://127.0.0.1:8010")


def test_default_manifest_is_valid():
    assert validate_manifest(copy.deepcopy(BASE)) == BASE


@pytest.mark.parametrize("mutate,message", [
    (lambda m: m.update(version=2), "manifest.version"),
    (lambda m: m.pop("community"), "manifest.community"),
    (lambda m: m["community"].update(name=""), "manifest.community.name"),
    (lambda m: m["homeserver"].update(url="ftp://x"), "manifest.homeserver.url"),
    (lambda m: m["homeserver"].pop("serverName"), "manifest.homeserver.serverName"),
    (lambda m: m["services"].pop("url"), "manifest.services.url"),
    (lambda m: m["modules"]["meetings"].pop("enabled"), "manifest.modules.meetings.enabled"),
    (lambda m: m["modules"]["wallet"]["assets"].append({"code": "ORB", "precision": 2}), "duplicate"),
    (lambda m: m["modules"]["wallet"]["assets"][0].update(precision=-1), "precision"),
    (lambda m: m["modules"]["wallet"]["assets"][0].update(code="orb"), "code"),
    (lambda m: m["encryption"].update(defaultEnabled="no"), "defaultEnabled"),
    (lambda m: m["encryption"].update(roomKeySharing="everyone"), "roomKeySharing"),
    (lambda m: m["encryption"].update(crossSigningBootstrap="later"), "crossSigningBootstrap"),
])
def test_invalid_manifests(mutate, message):
    m = copy.deepcopy(BASE)
    mutate(m)
    with pytest.raises(ManifestError, match=message.replace("[", r"\[")):
        validate_manifest(m)


def test_optional_sections_may_be_omitted():
    m = copy.deepcopy(BASE)
    del m["modules"], m["encryption"]
    validate_manifest(m)


def test_load_manifest_errors(tmp_path):
    with pytest.raises(ManifestError, match="not found"):
        load_manifest(str(tmp_path / "missing.json"))
    p = tmp_path / "bad.json"
    p.write_text("{")
    with pytest.raises(ManifestError, match="not valid JSON"):
        load_manifest(str(p))
    p.write_text(json.dumps(BASE))
    assert load_manifest(str(p)) == BASE


def test_the_dev_manifest_is_development_with_the_synapse_admin(tmp_path):
    from symorva_server import write_manifest

    path = tmp_path / "symorva.config.json"
    args = [str(path), "--homeserver", "http://127.0.0.1:8008", "--server-name", "localhost",
            "--services", "http://127.0.0.1:8010"]
    assert write_manifest.main(args) == 0
    m = load_manifest(str(path))
    assert m["services"] == {"url": "http://127.0.0.1:8010", "development": True, "admins": ["@admin:localhost"]}
    assert write_manifest.main(args + ["--admin", "@a:localhost", "--admin", "@b:localhost"]) == 0
    assert load_manifest(str(path))["services"]["admins"] == ["@a:localhost", "@b:localhost"]
    # No starting balance unless asked (Scripts/dev-server asks outside test mode).
    assert "startingBalances" not in load_manifest(str(path))["modules"]["wallet"]
    assert write_manifest.main(args + ["--starting-balance", "ORB=100.00"]) == 0
    assert load_manifest(str(path))["modules"]["wallet"]["startingBalances"] == {"ORB": "100.00"}
