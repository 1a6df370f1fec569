"""The member directory module: listing, search, paging, profiles from Matrix, roles."""

from __future__ import annotations

import pytest

from .conftest import assert_error, login

D = "/_symorva/v1/directory"
ADMIN = "@admin:localhost"


class Profiles:
    """Stands in for the homeserver's profile API."""

    def __init__(self) -> None:
        self.names: dict[str, tuple[str | None, str | None]] = {}
        self.calls: list[str] = []
        self.down = False

    async def __call__(self, user_id: str):
        self.calls.append(user_id)
        if self.down:
            return None
        return self.names.get(user_id, (None, None))


@pytest.fixture
def client(make_client):
    from symorva_server.config import default_manifest

    manifest = default_manifest("http://127.0.0.1:9", "localhost", "http://127.0.0.1:9")
    manifest["services"]["admins"] = [ADMIN]
    return make_client(manifest=manifest)


@pytest.fixture
def profiles(client) -> Profiles:
    p = Profiles()
    client.app.state.ctx.directory.fetch_profile = p
    return p


def headers(client, verifier, user_id):
    return login(client, verifier, user_id)["headers"]


def test_members_are_listed_with_matrix_profiles(client, verifier, profiles):
    profiles.names["@alice:localhost"] = ("Alice", "mxc://localhost/a")
    alice = headers(client, verifier, "@alice:localhost")
    r = client.get(f"{D}/members", headers=alice)
    assert r.status_code == 200, r.text
    assert r.json() == {"members": [{"user_id": "@alice:localhost", "display_name": "Alice",
                                     "avatar_url": "mxc://localhost/a", "roles": []}],
                        "next_from": None, "total": 1}


def test_search_matches_display_name_and_user_id_case_insensitively(client, verifier, profiles):
    profiles.names.update({"@alice:localhost": ("Alice Liddell", None), "@bob:localhost": ("Bob", None)})
    for user in ("@alice:localhost", "@bob:localhost"):
        client.get(f"{D}/members", headers=headers(client, verifier, user))
    alice = headers(client, verifier, "@alice:localhost")
    assert [m["user_id"] for m in client.get(f"{D}/members", params={"q": "LIDD"}, headers=alice).json()["members"]] \
        == ["@alice:localhost"]
    assert [m["user_id"] for m in client.get(f"{D}/members", params={"q": "bob:"}, headers=alice).json()["members"]] \
        == ["@bob:localhost"]
    assert client.get(f"{D}/members", params={"q": "%"}, headers=alice).json()["total"] == 0


def test_paging_walks_every_member_once(client, verifier, profiles):
    users = [f"@m{i:02d}:localhost" for i in range(7)]
    for user in users:
        client.get(f"{D}/members", headers=headers(client, verifier, user))
    me = headers(client, verifier, users[0])
    seen, from_ = [], None
    while True:
        params = {"limit": 3} | ({"from": from_} if from_ else {})
        body = client.get(f"{D}/members", params=params, headers=me).json()
        assert body["total"] == 7
        seen += [m["user_id"] for m in body["members"]]
        from_ = body["next_from"]
        if from_ is None:
            break
    assert seen == users


def test_a_bad_from_token_is_a_clear_error(client, verifier, profiles):
    me = headers(client, verifier, "@alice:localhost")
    assert_error(client.get(f"{D}/members", params={"from": "%%%"}, headers=me), 400, "SY_INVALID_PARAM")


def test_profiles_are_fetched_again_when_stale_and_kept_when_the_homeserver_is_down(client, verifier, profiles, clock):
    profiles.names["@alice:localhost"] = ("Alice", None)
    me = headers(client, verifier, "@alice:localhost")
    client.get(f"{D}/members", headers=me)
    profiles.names["@alice:localhost"] = ("Alice B", None)
    assert client.get(f"{D}/members", headers=me).json()["members"][0]["display_name"] == "Alice"  # still fresh
    clock.advance(301)
    assert client.get(f"{D}/members", headers=me).json()["members"][0]["display_name"] == "Alice B"
    profiles.down = True
    clock.advance(301)
    assert client.get(f"{D}/members", headers=me).json()["members"][0]["display_name"] == "Alice B"


def test_refresh_fetches_the_callers_profile_at_once(client, verifier, profiles):
    profiles.names["@alice:localhost"] = ("Alice", None)
    me = headers(client, verifier, "@alice:localhost")
    client.get(f"{D}/members", headers=me)
    profiles.names["@alice:localhost"] = ("Alicia", "mxc://localhost/new")
    r = client.post(f"{D}/profile/refresh", headers=me)
    assert r.status_code == 200, r.text
    assert r.json()["display_name"] == "Alicia" and r.json()["avatar_url"] == "mxc://localhost/new"


def test_admins_assign_and_remove_roles(client, verifier, profiles):
    admin = headers(client, verifier, ADMIN)
    bob = headers(client, verifier, "@bob:localhost")
    r = client.put(f"{D}/admin/members/@bob:localhost/roles/moderator", headers=admin)
    assert r.json() == {"user_id": "@bob:localhost", "role": "moderator", "changed": True}
    assert client.put(f"{D}/admin/members/@bob:localhost/roles/moderator", headers=admin).json()["changed"] is False
    client.put(f"{D}/admin/members/@bob:localhost/roles/steward", headers=admin)
    assert client.get(f"{D}/members/@bob:localhost", headers=bob).json()["roles"] == ["moderator", "steward"]
    only = client.get(f"{D}/members", params={"role": "steward"}, headers=bob).json()
    assert [m["user_id"] for m in only["members"]] == ["@bob:localhost"]
    assert client.delete(f"{D}/admin/members/@bob:localhost/roles/steward", headers=admin).json()["changed"] is True
    assert client.get(f"{D}/members/@bob:localhost", headers=bob).json()["roles"] == ["moderator"]


def test_members_cannot_assign_roles(client, verifier, profiles):
    bob = headers(client, verifier, "@bob:localhost")
    assert_error(client.put(f"{D}/admin/members/@bob:localhost/roles/moderator", headers=bob), 403, "SY_NOT_ADMIN")


def test_invalid_roles_and_user_ids_are_refused(client, verifier, profiles):
    admin = headers(client, verifier, ADMIN)
    assert_error(client.put(f"{D}/admin/members/@bob:localhost/roles/Bad Role", headers=admin), 400,
                 "SY_INVALID_PARAM")
    assert_error(client.put(f"{D}/admin/members/bob/roles/moderator", headers=admin), 400, "SY_INVALID_PARAM")


def test_an_unknown_member_is_not_found(client, verifier, profiles):
    me = headers(client, verifier, "@alice:localhost")
    assert_error(client.get(f"{D}/members/@nobody:localhost", headers=me), 404, "SY_NOT_FOUND")


def test_the_directory_needs_a_token(client):
    assert_error(client.get(f"{D}/members"), 401, "SY_MISSING_TOKEN")


def test_disabled_directory_has_no_routes(make_client, verifier):
    from symorva_server.config import default_manifest

    manifest = default_manifest("http://127.0.0.1:9", "localhost", "http://127.0.0.1:9")
    manifest["modules"]["directory"]["enabled"] = False
    c = make_client(manifest=manifest)
    assert c.app.state.ctx.directory is None
    assert_error(c.get(f"{D}/members", headers=headers(c, verifier, "@alice:localhost")), 404, "SY_NOT_FOUND")


def test_profile_ttl_option_is_validated(make_client):
    from symorva_server.config import ManifestError, default_manifest

    manifest = default_manifest("http://127.0.0.1:9", "localhost", "http://127.0.0.1:9")
    manifest["modules"]["directory"]["profileTtlSeconds"] = -1
    with pytest.raises(ManifestError):
        make_client(manifest=manifest)
