"""ServerContext (context.py): built in one step, every collaborator present."""

from __future__ import annotations

import dataclasses

from symorva_server.config import Settings, default_manifest
from symorva_server.context import ServerContext, build_context
from symorva_server.modules.wallet import Wallet

from .conftest import HOMESERVER, SERVER_NAME, FakeClock, FakeVerifier


def _build(tmp_path, *, wallet_enabled: bool, test_mode: bool = False) -> ServerContext:
    manifest = default_manifest(HOMESERVER, SERVER_NAME, "http://127.0.0.1:9")
    manifest["modules"]["wallet"]["enabled"] = wallet_enabled
    settings = Settings(homeserver_url=HOMESERVER, server_name=SERVER_NAME,
                        db_path=str(tmp_path / "ctx.db"), test_mode=test_mode)
    return build_context(settings, manifest, verifier=FakeVerifier(), clock=FakeClock())


def test_every_field_is_set_and_shares_the_database_and_clock(tmp_path):
    ctx = _build(tmp_path, wallet_enabled=True, test_mode=True)
    try:
        for f in dataclasses.fields(ctx):
            assert getattr(ctx, f.name) is not None, f.name
        assert isinstance(ctx.wallet, Wallet)
        assert ctx.tokens.db is ctx.db and ctx.wallet.db is ctx.db
        assert ctx.tokens.clock is ctx.clock and ctx.rate_limiter.clock is ctx.clock and ctx.wallet.clock is ctx.clock
        assert ctx.wallet.sealing_key is ctx.sealing_key
        tables = {r["name"] for r in ctx.db.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"access_tokens", "server_keys", "test_kv", "wallet_members"} <= tables
    finally:
        ctx.db.close()


def test_a_disabled_module_has_no_state_but_its_tables(tmp_path):
    ctx = _build(tmp_path, wallet_enabled=False)
    try:
        assert ctx.wallet is None
        tables = {r["name"] for r in ctx.db.query("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "wallet_members" in tables and "test_kv" not in tables
    finally:
        ctx.db.close()
