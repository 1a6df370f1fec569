"""Request and response bodies of the meetings API (the OpenAPI document shows them)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr


class JoinRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    room_id: StrictStr = Field(min_length=3, max_length=255, pattern=r"^![^\s]+$",
                               description="The Matrix room the meeting belongs to.")
    broadcast: StrictBool = Field(default=False, description=(
        "Open the meeting as a broadcast (only hosts start on stage). Only a host may open one; "
        "ignored when the room already has an active meeting."))


class HandRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    raised: StrictBool


class TargetRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user_id: StrictStr = Field(min_length=3, max_length=255, pattern=r"^@[^:\s]+:\S+$")


class MeetingOut(BaseModel):
    meeting_id: str
    room_id: str
    mode: str = Field(description="open | broadcast")
    stage_capacity: int
    status: str = Field(description="active | ended")
    end_reason: str | None = Field(description="ended_by_host | empty | services_restarted (when ended)")


class ParticipantOut(BaseModel):
    user_id: str
    role: str = Field(description="stage | listener")
    hand_raised: bool
    joined_at_ms: int


class MediaSessionOut(BaseModel):
    server_url: str = Field(description="Janus HTTP API base URL.")
    plugin: str = Field(description="janus.plugin.audiobridge")
    room: int = Field(description="The AudioBridge room.")
    participant_id: int = Field(description="The AudioBridge participant ID the services assigned to the member.")
    display: str = Field(description="The display name the services assigned (the member's user ID).")
    expires_at_ms: int = Field(description="When the member's token (kept by the services) stops being "
                                           "accepted unless renewed (server clock, ms).")


class MediaConnectOut(BaseModel):
    server_url: str = Field(description="Janus HTTP API base URL.")
    session_id: int = Field(description="The Janus session the services made and joined on: send keep-alives "
                                        "and read its events (long poll) there.")
    handle_id: int = Field(description="The AudioBridge handle, joined to the room: send `configure` with the "
                                       "WebRTC offer (and mute changes) and trickle candidates there.")
    room: int = Field(description="The AudioBridge room.")
    participant_id: int = Field(description="The participant ID the services joined with.")
    display: str = Field(description="The display the services joined with.")
    expires_at_ms: int = Field(description="When the member's token expires unless renewed (server clock, ms).")


class PlaybackOut(BaseModel):
    playlist_path: str = Field(description="Path of the live HLS playlist on the services (members only).")
    segment_seconds: int


class SnapshotOut(BaseModel):
    meeting: MeetingOut
    participants: list[ParticipantOut]
    cursor: int = Field(description="The change feed's position this snapshot includes.")


class JoinOut(SnapshotOut):
    role: str = Field(description="The admitted role: stage | listener")
    media: MediaSessionOut | None = Field(description="For stage: the media-session descriptor.")
    playback: PlaybackOut | None = Field(description="For listeners: the playback stream.")


class ChangeOut(BaseModel):
    seq: int
    kind: str = Field(description="opened | joined | role | hand | left | ended")
    user_id: str | None
    role: str | None
    hand_raised: bool | None
    at_ms: int


class ChangesOut(BaseModel):
    changes: list[ChangeOut]
    cursor: int = Field(description="Pass as `since` to the next request.")
    status: str
    participants: list[ParticipantOut] = Field(description="Participants after the last change returned.")
