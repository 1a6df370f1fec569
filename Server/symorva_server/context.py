"""The server context: the collaborators every handler and middleware shares.

`build_context` makes it in one go, from the settings and the (validated) manifest: the
database with every component's migrations applied, the sealing key, the token store,
the rate limiter, the fault registry and the state of each feature module that has one.
Nothing is filled in later; the app keeps it as `app.state.ctx`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import faults, modules, push
from .auth import OpenIdVerifier, TokenStore
from .config import Settings, admins, development
from .db import Database
from .faults import FaultRegistry
from .keys import SealingKey, load_or_create_sealing_key
from .modules import meetings as meetings_module
from .modules import wallet as wallet_module
from .modules.meetings import Meetings
from .modules.wallet import Wallet
from .modules import directory as directory_module
from .modules.directory import Directory
from .modules import ai_studio as studio_module
from .modules.ai_studio import MembershipChecker, Studio, SynapseAdminMembership, UnconfiguredMembership
from .ratelimit import RateLimiter


@dataclass
class ServerContext:
    settings: Settings
    manifest: dict[str, Any]
    db: Database
    verifier: OpenIdVerifier
    clock: Callable[[], float]
    faults: FaultRegistry
    rate_limiter: RateLimiter
    tokens: TokenStore
    sealing_key: SealingKey
    # Matrix user IDs allowed on the admin endpoints (manifest services.admins).
    admins: frozenset[str]
    # Development mode (manifest services.development, or --test): development-only
    # endpoints such as the admin credit answer; never in production.
    development: bool
    # Feature module state: one typed field per module that has any, None when the module
    # is disabled in the manifest (its routes are not mounted then).
    wallet: Wallet | None
    directory: Directory | None
    meetings: Meetings | None = None
    ai_studio: Studio | None = None
    # The push gateway's own connection (push.py: a notify never takes the services' lock) and the
    # addresses it accepts notify from (the homeserver's).
    push_db: Database | None = None
    push_notify_from: frozenset[str] = frozenset()


def build_context(settings: Settings, manifest: dict[str, Any], *, verifier: OpenIdVerifier,
                  clock: Callable[[], float], meetings_rooms: Any = None, meetings_media: Any = None,
                  membership: MembershipChecker | None = None) -> ServerContext:
    """Opens the database and builds everything on it. Raises ManifestError for invalid
    module options."""
    db = Database(settings.db_path)
    tokens = TokenStore(db, clock, settings.token_lifetime_s)
    sealing_key = load_or_create_sealing_key(db, int(clock() * 1000))
    if settings.test_mode:
        db.migrate("test", faults.KV_MIGRATIONS)
    modules.migrate_modules(db)
    db.migrate("push", push.MIGRATIONS)

    wallet_enabled, wallet_options = modules.module_options(manifest, wallet_module.MODULE_ID)
    wallet = (wallet_module.create_state(wallet_options, db=db, clock=clock, sealing_key=sealing_key,
                                         settings=settings, development=development(manifest, settings))
              if wallet_enabled else None)
    directory_enabled, directory_options = modules.module_options(manifest, directory_module.MODULE_ID)
    directory = (directory_module.create_state(directory_options, db=db, clock=clock,
                                               homeserver_url=settings.homeserver_url)
                 if directory_enabled else None)

    meetings_enabled, meetings_options = modules.module_options(manifest, meetings_module.MODULE_ID)
    meetings = (meetings_module.create_state(meetings_options, db=db, clock=clock, settings=settings,
                                             rooms=meetings_rooms, media=meetings_media)
                if meetings_enabled else None)

    studio_enabled, studio_options = modules.module_options(manifest, studio_module.MODULE_ID)
    if membership is None:
        membership = (SynapseAdminMembership(settings.homeserver_url, settings.homeserver_admin_file)
                      if settings.homeserver_admin_file else UnconfiguredMembership())
    ai_studio = (studio_module.create_state(studio_options, db=db, clock=clock, membership=membership)
                 if studio_enabled else None)

    push_db = Database(settings.db_path) if settings.db_path != ":memory:" else db
    notify_from = (frozenset(push._normalised(a) for a in settings.push_notify_from)
                   if settings.push_notify_from is not None else push.notify_sources(settings.homeserver_url))

    return ServerContext(
        push_db=push_db,
        push_notify_from=notify_from,
        settings=settings,
        manifest=manifest,
        db=db,
        verifier=verifier,
        clock=clock,
        faults=FaultRegistry(),
        rate_limiter=RateLimiter(settings.rate_limits, clock),
        tokens=tokens,
        sealing_key=sealing_key,
        admins=admins(manifest),
        development=development(manifest, settings),
        wallet=wallet,
        meetings=meetings,
        directory=directory,
        ai_studio=ai_studio,
    )
