"""AI studio module: consent-first grants, summaries under a grant, revoke, audit.

What the server guarantees (docs/ai-studio.md, "Server side", has the full contract):

- A grant is for one member, one room (the member must be joined, asked of the homeserver),
  one scope (`selected_messages` or `conversation_since`) and one purpose (`summarize`), and
  expires (manifest `grantTtlSeconds`, default one hour). State: active, revoked, expired.
- A summarize request names the grant and carries the items (event ID, sender, timestamp,
  body). The whole request is refused, naming the first offending item, when any item is
  outside the scope; and when the grant is revoked, expired or another member's. The grant
  is checked again once the summary is made, so a revoke in flight fails it.
- Content is never stored: the audit records grant, action, outcome, counts and event IDs.
- The summary comes from an offline extractive summarizer (sumy LexRank/TextRank) or, by
  configuration, an OpenAI-compatible endpoint; every point cites its event IDs.
"""

from __future__ import annotations

from .domain import Studio, StudioConfig, create_state
from .membership import MembershipChecker, MembershipUnavailable, SynapseAdminMembership, UnconfiguredMembership
from .routes import PREFIX, TEST_PREFIX, capabilities, router, test_router
from .schema import MIGRATIONS

MODULE_ID = "aiStudio"

__all__ = [
    "MIGRATIONS", "MODULE_ID", "PREFIX", "TEST_PREFIX", "MembershipChecker", "MembershipUnavailable", "Studio",
    "StudioConfig", "SynapseAdminMembership", "UnconfiguredMembership", "capabilities", "create_state", "router",
    "test_router",
]
