"""The studio's request and response bodies (pydantic; their names are the OpenAPI schemas)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr

_EVENT_ID = r"^\$[^\s]{1,254}$"
_ROOM_ID = r"^![^\s]{1,254}$"

EventID = Annotated[StrictStr, Field(pattern=_EVENT_ID, max_length=255)]


class SelectedMessagesScope(BaseModel):
    """Exactly these messages of the room, nothing else."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["selected_messages"]
    event_ids: list[EventID] = Field(min_length=1, max_length=1000,
                                     description="The selected messages' event IDs (no duplicates).")


class ConversationSinceScope(BaseModel):
    """The room's messages from one message on: that message and every later one (by
    `origin_server_ts`), while the grant lives."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["conversation_since"]
    since_event_id: EventID = Field(description="The first message the grant covers.")
    since_ts: StrictInt = Field(ge=0, description="Its origin_server_ts (ms); earlier messages are outside.")


Scope = Annotated[SelectedMessagesScope | ConversationSinceScope, Field(discriminator="kind")]


class GrantRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    room_id: StrictStr = Field(pattern=_ROOM_ID, max_length=255, description="The conversation (Matrix room ID).")
    scope: Scope
    purpose: Literal["summarize"] = Field(description="What the content may be used for.")
    expires_in_ms: StrictInt | None = Field(
        default=None, ge=1,
        description="Requested lifetime; default the community's grant lifetime, capped at its maximum.")


class GrantOut(BaseModel):
    grant_id: str
    user_id: str = Field(description="The member the grant belongs to (only they can use it).")
    room_id: str
    purpose: Literal["summarize"]
    scope: Scope
    state: Literal["active", "revoked", "expired"] = Field(description="On the server's clock.")
    created_at_ms: int
    expires_at_ms: int
    expires_in_ms: int = Field(description=(
        "How long the grant has left on the service's clock (0 once expired): what a client restoring "
        "it after a restart counts its expiry from, never its own wall clock."))
    revoked_at_ms: int | None


class GrantList(BaseModel):
    grants: list[GrantOut] = Field(description="The member's grants, newest first.")


class ContentItem(BaseModel):
    """One message, decrypted on the member's device. Never stored, never logged."""

    model_config = ConfigDict(extra="forbid")
    event_id: EventID
    sender: StrictStr = Field(pattern=r"^@[^\s:]+:\S+$", max_length=255)
    timestamp: StrictInt = Field(ge=0, description="origin_server_ts in ms.")
    body: StrictStr = Field(min_length=1, max_length=16_384)


class SummarizeRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    grant_id: StrictStr = Field(min_length=1, max_length=64)
    items: list[ContentItem] = Field(min_length=1, max_length=1000,
                                     description="Every item must be inside the grant's scope, else the whole "
                                                 "request is refused (SY_OUT_OF_SCOPE names the first one).")
    max_points: StrictInt | None = Field(default=None, ge=1, le=20, description="At most this many summary points.")


class SummaryPoint(BaseModel):
    text: str
    event_ids: list[str] = Field(description="The messages this point was drawn from.")


class SummaryOut(BaseModel):
    grant_id: str
    backend: str = Field(description="Which summarizer made it, e.g. `extractive-lexrank`.")
    item_count: int
    points: list[SummaryPoint]
    cited_event_ids: list[str] = Field(description="Every event ID the summary drew from, in conversation order.")


class AuditEntry(BaseModel):
    seq: int
    at_ms: int
    grant_id: str | None
    action: Literal["grant", "summarize", "revoke"]
    outcome: str = Field(description="`ok`, or the SY_ error code the request was refused with.")
    item_count: int
    item_ids: list[str] = Field(description="Event IDs of the items received (never their bodies).")
    cited_event_ids: list[str]


class AuditPage(BaseModel):
    entries: list[AuditEntry] = Field(description="The member's audit entries, newest first.")


class StudioStatsOut(BaseModel):
    requests: int = Field(description="Studio requests received from the caller since the server started.")
