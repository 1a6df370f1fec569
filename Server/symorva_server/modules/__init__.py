"""Feature modules of the community services (meetings, aiStudio, wallet, directory).

Each module lives in its own file (or package) here and may define:

- ``MODULE_ID``: its key in the manifest's ``modules`` object (e.g. "wallet");
- ``router``: a FastAPI APIRouter, mounted when the module is enabled in the manifest;
- ``MIGRATIONS``: list of SQL scripts, applied to the database at startup;
- ``capabilities(ctx, options) -> dict``: server-provided fields added to the module's
  entry in ``GET /_symorva/v1/capabilities`` (beside "enabled" and "options").
- ``test_router``: mounted when the module is enabled and the server runs with --test.

A module with run-time state gets a typed field of ``ServerContext`` (context.py), None
when the module is disabled, that ``build_context`` fills from the module's
``create_state(options, ...)`` (the wallet: ``ServerContext.wallet``).

Register a new module by adding it to ``MODULES`` below.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import ai_studio, directory, meetings, wallet

if TYPE_CHECKING:
    from fastapi import FastAPI

    from ..context import ServerContext
    from ..db import Database

MODULES = {m.MODULE_ID: m for m in (meetings, ai_studio, wallet, directory)}


def module_options(manifest: dict[str, Any], module_id: str) -> tuple[bool, dict[str, Any]]:
    entry = manifest.get("modules", {}).get(module_id)
    if not isinstance(entry, dict):
        return False, {}
    options = {k: v for k, v in entry.items() if k != "enabled"}
    return bool(entry.get("enabled")), options


def migrate_modules(db: Database) -> None:
    """Applies every module's migrations (enabled or not: a module's tables always exist)."""
    for module_id, mod in MODULES.items():
        migrations = getattr(mod, "MIGRATIONS", None)
        if migrations:
            db.migrate(f"module:{module_id}", migrations)


def include_routers(app: FastAPI, ctx: ServerContext) -> None:
    """Mounts the routers of the enabled modules (and their test routers with --test)."""
    for module_id, mod in MODULES.items():
        enabled, _ = module_options(ctx.manifest, module_id)
        router = getattr(mod, "router", None)
        if enabled and router is not None:
            app.include_router(router)
        test_router = getattr(mod, "test_router", None)
        if enabled and ctx.settings.test_mode and test_router is not None:
            app.include_router(test_router)


def capabilities(ctx: ServerContext) -> dict[str, Any]:
    out: dict[str, Any] = {}
    module_ids = list(MODULES) + [m for m in ctx.manifest.get("modules", {}) if m not in MODULES]
    for module_id in module_ids:
        enabled, options = module_options(ctx.manifest, module_id)
        entry: dict[str, Any] = {"enabled": enabled, "options": options}
        mod = MODULES.get(module_id)
        extra = getattr(mod, "capabilities", None) if mod else None
        if enabled and extra is not None:
            entry.update(extra(ctx, options))
        out[module_id] = entry
    return out
