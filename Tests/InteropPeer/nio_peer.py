#!/usr/bin/env python3
"""A matrix-nio client driven by SymorvaKit's interoperability tests.

An independent Matrix client with its own end-to-end encryption (matrix-nio's `e2e` extra:
vodozemac in 0.26, requirements.txt; the verification tests run it with 0.25.2 on python-olm,
requirements-nio-olm.txt): it logs in to the local Synapse as its own user and then does what the Swift test
asks, one JSON object per line on standard input, answering each with one JSON line on standard
output (`{"id": n, "ok": true, ...}` or `{"id": n, "ok": false, "error": "..."}`). A sync loop
runs in the background from the login on, doing what nio's own `sync_forever` does after each
sync (to-device messages out, keys uploaded, queried and claimed) and retrying the decryption of
the room events whose key had not arrived yet.

Operations (besides `id`):
  login        homeserver, user, password           -> user_id, device_id, curve25519, ed25519
  create_room  name, invite, history_visibility?,   -> room_id (encrypted, m.megolm.v1.aes-sha2,
               encrypted?                              unless encrypted is false), once it has
                                                       synced as such
  wait_invite  room_id                              -> once the invite has synced
  join         room_id, encrypted?                  -> once the joined room has synced (as
                                                       encrypted unless encrypted is false)
  leave        room_id                              -> once the server has the leave
  wait_member  room_id, user_id                     -> once the user is a joined member here
  send         room_id, body[, replaces | thread |  -> event_id (encrypted by nio; devices not
               reply_to]                               verified are sent the key anyway); with
                                                       replaces an edit of that event, with
                                                       thread a reply in that thread (the
                                                       fallback unless reply_to), with
                                                       reply_to a reply to it
  send_file    room_id, path, content_type, name    -> event_id, url: the file uploaded with nio's
                                                       upload (v3; in an encrypted room encrypted
                                                       by nio.crypto.attachments, its `file` in
                                                       the Megolm event), an m.image or m.file
  download_file room_id, event_id, path             -> size, encrypted, sha256 (hex, of what was
                                                       written): the event's media downloaded on
                                                       nio's v1 (authenticated) media path and,
                                                       when encrypted, hash-checked and decrypted
                                                       by nio.crypto.attachments.decrypt_attachment
  messages     room_id                              -> decrypted [{event_id, sender, body,
                                                       sender_key, session_id, rel_type,
                                                       relates_to, in_reply_to, new_body}] and
                                                       undecrypted [{event_id, sender,
                                                       session_id}], in order
  devices      user_id                              -> the device IDs nio knows for the user
  verify       user_id, device_id                   -> once nio knows the device: marks it verified
                                                       (nio forwards keys to, and accepts forwarded
                                                       keys from, verified own devices only) and
                                                       goes on with its key requests that waited
  request_keys room_id                              -> asks the account's other devices for the
                                                       keys of the room's undecrypted events
  forget_sessions curve25519                        -> forgets nio's Olm sessions with that device
                                                       (as if its session store were lost)
  wait_device  user_id, device_id                   -> once nio knows the device (nothing marked)
  sas_start    user_id, device_id,                  -> transaction_id: nio starts a SAS
               key_agreements?                         (m.key.verification.start, no request);
                                                       key_agreements narrows what nio offers
                                                       (matrix-nio offers both, from a class
                                                       attribute: set for the peer's process)
  sas_incoming user_id, device_id                   -> transaction_id of the SAS that device
                                                       started with nio, once nio has it
  sas_accept   transaction_id, key_agreements?      -> nio accepts the SAS started with it, choosing
                                                       among key_agreements only when given (as a
                                                       client that supports only those would)
  sas_code     transaction_id                       -> emoji [{emoji, description}], decimals and
                                                       the methods in use (key_agreement, mac)
                                                       once nio knows the other key (or canceled,
                                                       with its code)
  sas_confirm  transaction_id                       -> nio says the codes match (sends its MAC)
  sas_reject   transaction_id                       -> nio says the codes differ (cancels
                                                       m.mismatched_sas)
  sas_result   transaction_id                       -> verified, canceled, cancel_code and
                                                       device_verified (nio's store), once nio's
                                                       SAS is verified or canceled
  nio_version                                       -> version (matrix-nio's), crypto (olm or
                                                       vodozemac)
  quit                                              -> closes the client and exits

Message bodies are written to standard output only (the test reads them); nothing is logged
below warnings, and nio's own logging goes to standard error.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import sys
import tempfile
from typing import Any

from nio import (
    AsyncClient,
    AsyncClientConfig,
    EncryptionError,
    JoinError,
    LoginError,
    LocalProtocolError,
    MegolmEvent,
    RoomCreateError,
    RoomEncryptedMedia,
    RoomLeaveError,
    RoomKeyRequest,
    RoomMessageMedia,
    RoomMessageText,
    RoomSendError,
    SyncError,
    UploadResponse,
)
from nio.crypto.attachments import decrypt_attachment


class Peer:
    def __init__(self) -> None:
        self.client: AsyncClient | None = None
        self.sync_task: asyncio.Task[None] | None = None
        self.synced = asyncio.Condition()
        # room -> event ID -> what the test sees of the event, in arrival order.
        self.timeline: dict[str, dict[str, dict[str, Any]]] = {}
        self.undecrypted: dict[str, dict[str, MegolmEvent]] = {}
        self.sync_error: str | None = None
        # Key requests of devices nio did not trust yet, by requesting device.
        self.untrusted_requests: dict[str, list[RoomKeyRequest]] = {}
        # room -> event ID -> the media event's content (url, or file with key, iv, hashes).
        self.media: dict[str, dict[str, dict[str, Any]]] = {}

    # --- the sync loop ------------------------------------------------------------------

    def on_event(self, room: Any, event: Any) -> None:
        self.record(room.room_id, event)

    def on_key_request(self, event: Any) -> None:
        if isinstance(event, RoomKeyRequest):
            self.untrusted_requests.setdefault(event.requesting_device_id, []).append(event)

    def record(self, room_id: str, event: Any) -> None:
        events = self.timeline.setdefault(room_id, {})
        if isinstance(event, MegolmEvent):
            self.undecrypted.setdefault(room_id, {})[event.event_id] = event
            events.setdefault(
                event.event_id,
                {"event_id": event.event_id, "sender": event.sender, "session_id": event.session_id, "decrypted": False},
            )
        elif isinstance(event, RoomMessageText):
            content = event.source.get("content", {})
            relation = content.get("m.relates_to") or {}
            new_content = content.get("m.new_content") or {}
            events[event.event_id] = {
                "event_id": event.event_id,
                "sender": event.sender,
                "body": event.body,
                "decrypted": bool(getattr(event, "decrypted", False)),
                "sender_key": getattr(event, "sender_key", None),
                "session_id": getattr(event, "session_id", None),
                "rel_type": relation.get("rel_type"),
                "relates_to": relation.get("event_id"),
                "in_reply_to": (relation.get("m.in_reply_to") or {}).get("event_id"),
                "new_body": new_content.get("body"),
            }
            self.undecrypted.get(room_id, {}).pop(event.event_id, None)
        elif isinstance(event, (RoomMessageMedia, RoomEncryptedMedia)):
            content = event.source.get("content", {})
            self.media.setdefault(room_id, {})[event.event_id] = content
            events[event.event_id] = {
                "event_id": event.event_id,
                "sender": event.sender,
                "body": event.body,
                "decrypted": bool(getattr(event, "decrypted", False)),
                "sender_key": getattr(event, "sender_key", None),
                "session_id": getattr(event, "session_id", None),
            }
            self.undecrypted.get(room_id, {}).pop(event.event_id, None)

    def retry_undecrypted(self) -> None:
        assert self.client
        for room_id, events in list(self.undecrypted.items()):
            for event_id, event in list(events.items()):
                try:
                    decrypted = self.client.decrypt_event(event)
                except EncryptionError:
                    continue
                decrypted.room_id = room_id
                self.record(room_id, decrypted)

    async def sync_loop(self) -> None:
        assert self.client
        client = self.client
        first = True
        while True:
            response = await client.sync(timeout=0 if first else 1000, full_state=first)
            if isinstance(response, SyncError):
                self.sync_error = response.message
                await asyncio.sleep(0.5)
                continue
            first = False
            # What nio's sync_forever does after each sync.
            if client.outgoing_to_device_messages:
                await client.send_to_device_messages()
            if client.should_upload_keys:
                await client.keys_upload()
            if client.should_query_keys:
                await client.keys_query()
            if client.should_claim_keys:
                await client.keys_claim(client.get_users_for_key_claiming())
            self.retry_undecrypted()
            async with self.synced:
                self.synced.notify_all()

    async def wait_for(self, predicate: Any, timeout: float) -> bool:
        """Waits until `predicate()` holds after a sync (or now), at most `timeout` seconds."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        async with self.synced:
            while not predicate():
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return False
                try:
                    await asyncio.wait_for(self.synced.wait(), remaining)
                except asyncio.TimeoutError:
                    return predicate()
        return True

    def is_encrypted(self, room_id: str) -> bool:
        assert self.client
        room = self.client.rooms.get(room_id)
        return room is not None and room.encrypted

    def is_joined(self, room_id: str, encrypted: bool) -> bool:
        """Whether the room has synced as joined, and as encrypted when `encrypted`."""
        assert self.client
        room = self.client.rooms.get(room_id)
        return room is not None and (room.encrypted or not encrypted)

    # --- operations ---------------------------------------------------------------------

    async def login(self, args: dict[str, Any]) -> dict[str, Any]:
        config = AsyncClientConfig(encryption_enabled=True, store_sync_tokens=False)
        self.client = AsyncClient(
            args["homeserver"], args["user"], store_path=tempfile.mkdtemp(prefix="nio-peer-"), config=config
        )
        client = self.client
        client.add_event_callback(self.on_event, (RoomMessageText, RoomMessageMedia, RoomEncryptedMedia, MegolmEvent))
        client.add_to_device_callback(self.on_key_request, (RoomKeyRequest,))
        response = await client.login(args["password"], device_name="nio interop peer")
        if isinstance(response, LoginError):
            raise RuntimeError(f"login failed: {response.message}")
        if client.should_upload_keys:
            await client.keys_upload()
        self.sync_task = asyncio.create_task(self.sync_loop())
        keys = client.olm.account.identity_keys
        return {
            "user_id": client.user_id,
            "device_id": client.device_id,
            "curve25519": keys["curve25519"],
            "ed25519": keys["ed25519"],
        }

    async def create_room(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        encrypted = args.get("encrypted", True)
        initial_state = []
        if encrypted:
            initial_state.append(
                {"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}}
            )
        if "history_visibility" in args:
            initial_state.append(
                {
                    "type": "m.room.history_visibility",
                    "state_key": "",
                    "content": {"history_visibility": args["history_visibility"]},
                }
            )
        response = await self.client.room_create(
            name=args.get("name"), invite=args.get("invite", []), initial_state=initial_state
        )
        if isinstance(response, RoomCreateError):
            raise RuntimeError(f"room_create failed: {response.message}")
        room_id = response.room_id
        if not await self.wait_for(lambda: self.is_joined(room_id, encrypted), 60):
            raise RuntimeError("the created room never synced")
        return {"room_id": room_id}

    async def wait_invite(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        room_id = args["room_id"]
        if not await self.wait_for(lambda: room_id in self.client.invited_rooms, args.get("timeout", 60)):
            raise RuntimeError("no invite")
        return {}

    async def join(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        room_id = args["room_id"]
        response = await self.client.join(room_id)
        if isinstance(response, JoinError):
            raise RuntimeError(f"join failed: {response.message}")
        if not await self.wait_for(lambda: self.is_joined(room_id, args.get("encrypted", True)), 60):
            raise RuntimeError("the joined room never synced")
        return {}

    async def leave(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        response = await self.client.room_leave(args["room_id"])
        if isinstance(response, RoomLeaveError):
            raise RuntimeError(f"leave failed: {response.message}")
        return {}

    async def wait_member(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        room_id, user_id = args["room_id"], args["user_id"]

        def joined() -> bool:
            room = self.client.rooms.get(room_id)
            return room is not None and user_id in room.users and user_id not in room.invited_users

        if not await self.wait_for(joined, args.get("timeout", 60)):
            raise RuntimeError(f"{user_id} never joined")
        return {}

    # --- conversation features: typing, receipts, knocking, the space hierarchy -------------

    async def typing(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        response = await self.client.room_typing(args["room_id"], typing_state=args["typing"], timeout=30000)
        if not hasattr(response, "room_id"):
            raise RuntimeError(f"typing failed: {response}")
        return {}

    async def wait_typing(self, args: dict[str, Any]) -> dict[str, Any]:
        """Waits until the room's typing list says `user_id` types (or not, `typing` false)."""
        assert self.client
        room_id, user_id, wanted = args["room_id"], args["user_id"], args.get("typing", True)

        def matches() -> bool:
            room = self.client.rooms.get(room_id)
            return room is not None and (user_id in room.typing_users) == wanted

        if not await self.wait_for(matches, args.get("timeout", 60)):
            raise RuntimeError(f"typing of {user_id} never became {wanted}")
        return {}

    async def read(self, args: dict[str, Any]) -> dict[str, Any]:
        """Sets the fully-read marker and the read receipt at `event_id` (`read_markers`)."""
        assert self.client
        event_id = args["event_id"]
        response = await self.client.room_read_markers(args["room_id"], event_id, event_id)
        if not hasattr(response, "room_id"):
            raise RuntimeError(f"read markers failed: {response}")
        return {}

    async def wait_receipt(self, args: dict[str, Any]) -> dict[str, Any]:
        """Waits until `user_id`'s read receipt in the room is at `event_id`: the unthreaded one,
        or the one of `thread_id` when given (`main` for the main timeline)."""
        assert self.client
        room_id, user_id, event_id = args["room_id"], args["user_id"], args["event_id"]
        thread_id = args.get("thread_id")

        def matches() -> bool:
            room = self.client.rooms.get(room_id)
            if room is None:
                return False
            if thread_id is None:
                receipt = room.read_receipts.get(user_id)
            else:
                receipt = room.threaded_read_receipts.get(user_id, {}).get(thread_id)
            return receipt is not None and receipt.event_id == event_id

        if not await self.wait_for(matches, args.get("timeout", 60)):
            raise RuntimeError(f"no read receipt of {user_id} at {event_id}")
        return {}

    async def knock(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        response = await self.client.room_knock(args["room_id"], reason=args.get("reason"))
        if not hasattr(response, "room_id"):
            raise RuntimeError(f"knock failed: {response}")
        return {}

    async def hierarchy(self, args: dict[str, Any]) -> dict[str, Any]:
        """The room IDs of the space's hierarchy, every page (`/v1/rooms/{id}/hierarchy`)."""
        assert self.client
        rooms: list[str] = []
        token = None
        while True:
            response = await self.client.space_get_hierarchy(args["space_id"], from_page=token, limit=args.get("limit", 50))
            if not hasattr(response, "rooms"):
                raise RuntimeError(f"hierarchy failed: {response}")
            rooms += [room["room_id"] for room in response.rooms]
            token = getattr(response, "next_batch", None)
            if not token:
                return {"room_ids": rooms}

    async def send(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        room_id = args["room_id"]
        room = self.client.rooms.get(room_id)
        if room is None or not room.encrypted:
            raise RuntimeError("not an encrypted room the peer is in")
        content: dict[str, Any] = {"msgtype": "m.text", "body": args["body"]}
        if args.get("replaces"):
            content["body"] = "* " + args["body"]
            content["m.new_content"] = {"msgtype": "m.text", "body": args["body"]}
            content["m.relates_to"] = {"rel_type": "m.replace", "event_id": args["replaces"]}
        elif args.get("thread"):
            # A reply in a thread with the spec's fallback (or a real reply in it with reply_to).
            content["m.relates_to"] = {
                "rel_type": "m.thread",
                "event_id": args["thread"],
                "is_falling_back": not args.get("reply_to"),
                "m.in_reply_to": {"event_id": args.get("reply_to") or args["thread"]},
            }
        elif args.get("reply_to"):
            content["m.relates_to"] = {"m.in_reply_to": {"event_id": args["reply_to"]}}
        response = await self.client.room_send(
            room_id,
            "m.room.message",
            content,
            ignore_unverified_devices=True,
        )
        if isinstance(response, RoomSendError):
            raise RuntimeError(f"room_send failed: {response.message}")
        return {"event_id": response.event_id}

    async def send_file(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        room_id, path, content_type = args["room_id"], args["path"], args["content_type"]
        encrypted = self.is_encrypted(room_id)
        size = os.path.getsize(path)
        response, decryption = await self.client.upload(
            lambda *_: path,
            content_type="application/octet-stream" if encrypted else content_type,
            filename=None if encrypted else args["name"],
            encrypt=encrypted,
            filesize=size,
        )
        if not isinstance(response, UploadResponse):
            raise RuntimeError(f"upload failed: {getattr(response, 'message', response)}")
        content: dict[str, Any] = {
            "msgtype": "m.image" if content_type.startswith("image/") else "m.file",
            "body": args["name"],
            "info": {"mimetype": content_type, "size": size},
        }
        if encrypted:
            content["file"] = {**decryption, "url": response.content_uri}
        else:
            content["url"] = response.content_uri
        sent = await self.client.room_send(room_id, "m.room.message", content, ignore_unverified_devices=True)
        if isinstance(sent, RoomSendError):
            raise RuntimeError(f"room_send failed: {sent.message}")
        return {"event_id": sent.event_id, "url": response.content_uri}

    async def download_file(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        room_id, event_id = args["room_id"], args["event_id"]
        if not await self.wait_for(lambda: event_id in self.media.get(room_id, {}), args.get("timeout", 60)):
            raise RuntimeError("no such media event")
        content = self.media[room_id][event_id]
        encrypted = "file" in content
        url = content["file"]["url"] if encrypted else content["url"]
        response = await self.client.download(mxc=url)
        body = getattr(response, "body", None)
        if not isinstance(body, bytes):
            raise RuntimeError(f"download failed: {getattr(response, 'message', response)}")
        if encrypted:
            file = content["file"]
            # Checks the ciphertext's SHA-256 (EncryptionError on a mismatch), then decrypts.
            body = decrypt_attachment(body, file["key"]["k"], file["hashes"]["sha256"], file["iv"])
        with open(args["path"], "wb") as output:
            output.write(body)
        return {"size": len(body), "encrypted": encrypted, "sha256": hashlib.sha256(body).hexdigest()}

    async def messages(self, args: dict[str, Any]) -> dict[str, Any]:
        events = list(self.timeline.get(args["room_id"], {}).values())
        return {
            "decrypted": [e for e in events if e["decrypted"]],
            "undecrypted": [e for e in events if not e["decrypted"]],
            "sync_error": self.sync_error,
        }

    async def devices(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        return {"device_ids": sorted(d.id for d in self.client.device_store.active_user_devices(args["user_id"]))}

    async def verify(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        user_id, device_id = args["user_id"], args["device_id"]

        def known() -> bool:
            return any(d.id == device_id for d in self.client.device_store.active_user_devices(user_id))

        if not await self.wait_for(known, args.get("timeout", 60)):
            raise RuntimeError(f"nio never learnt {user_id} {device_id}")
        device = self.client.device_store[user_id][device_id]
        self.client.verify_device(device)
        for request in self.untrusted_requests.pop(device_id, []):
            self.client.continue_key_share(request)
        return {}

    async def forget_sessions(self, args: dict[str, Any]) -> dict[str, Any]:
        """Forgets every Olm session with the device whose Curve25519 key is given, as a device
        that lost its session store would: what that device sends over them can no longer be read."""
        assert self.client and self.client.olm
        olm = self.client.olm
        curve_key = args["curve25519"]
        sessions = olm.session_store._entries.pop(curve_key, [])
        return {"forgotten": len(sessions)}

    async def request_keys(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        requested = 0
        for event in list(self.undecrypted.get(args["room_id"], {}).values()):
            try:
                await self.client.request_room_key(event)
                requested += 1
            except LocalProtocolError:
                pass  # already requested for this session
        return {"requested": requested}

    # --- interactive verification (SAS over to-device, the flow that begins with `start`) --

    def sas(self, transaction_id: str) -> Any:
        assert self.client
        return self.client.key_verifications.get(transaction_id)

    def device(self, user_id: str, device_id: str) -> Any:
        assert self.client
        return next((d for d in self.client.device_store.active_user_devices(user_id) if d.id == device_id), None)

    async def wait_device(self, args: dict[str, Any]) -> dict[str, Any]:
        user_id, device_id = args["user_id"], args["device_id"]
        if not await self.wait_for(lambda: self.device(user_id, device_id) is not None, args.get("timeout", 60)):
            raise RuntimeError(f"nio never learnt {user_id} {device_id}")
        return {}

    @staticmethod
    def key_agreements(args: dict[str, Any], offered: list[str]) -> list[str]:
        wanted = args.get("key_agreements")
        if wanted is None:
            return list(offered)
        unknown = [k for k in wanted if k not in offered]
        if unknown:
            raise RuntimeError(f"matrix-nio does not support {unknown} (it has {offered})")
        return list(wanted)

    async def sas_start(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        from nio.crypto.sas import Sas

        await self.wait_device(args)
        # nio's start message (and its later check of the commitment against it) reads the class
        # attribute; narrowing it is the only way to make nio offer one key agreement.
        Sas._key_agreeemnt_protocols = self.key_agreements(args, [Sas._key_agreement_v1, Sas._key_agreement_v2])
        device = self.device(args["user_id"], args["device_id"])
        message = self.client.create_key_verification(device)
        await self.client.to_device(message)
        return {"transaction_id": message.content["transaction_id"]}

    async def sas_incoming(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client

        def started() -> str | None:
            for transaction_id, sas in self.client.key_verifications.items():
                other = sas.other_olm_device
                if other.user_id == args["user_id"] and other.id == args["device_id"] and not sas.we_started_it:
                    return transaction_id
            return None

        if not await self.wait_for(lambda: started() is not None, args.get("timeout", 60)):
            raise RuntimeError("no verification started with nio")
        return {"transaction_id": started()}

    async def sas_accept(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        sas = self.sas(args["transaction_id"])
        if sas is None:
            raise RuntimeError("unknown transaction")
        # nio picks curve25519-hkdf-sha256 whenever the start offers it; a narrower list here is
        # what a client that knows only the older method would choose from.
        sas.key_agreement_protocols = [
            k for k in sas.key_agreement_protocols if k in self.key_agreements(args, sas.key_agreement_protocols)
        ]
        await self.client.accept_key_verification(args["transaction_id"])
        return {}

    async def sas_code(self, args: dict[str, Any]) -> dict[str, Any]:
        transaction_id = args["transaction_id"]

        def ready() -> bool:
            sas = self.sas(transaction_id)
            # python-olm's Sas (nio 0.25) says other_key_set; nio 0.26 keeps established_sas.
            has_key = getattr(sas, "other_key_set", None) or getattr(sas, "established_sas", None) is not None
            return sas is not None and (has_key or sas.canceled)

        if not await self.wait_for(ready, args.get("timeout", 60)):
            raise RuntimeError("nio never got the other key")
        sas = self.sas(transaction_id)
        if sas.canceled:
            return {"canceled": True, "cancel_code": sas.cancel_code}
        return {
            "emoji": [{"emoji": emoji, "description": name} for emoji, name in sas.get_emoji()],
            "decimals": list(sas.get_decimals()),
            "key_agreement": sas.chosen_key_agreement,
            "mac": sas.chosen_mac_method,
        }

    async def sas_confirm(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        await self.client.confirm_short_auth_string(args["transaction_id"])
        return {}

    async def sas_reject(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        await self.client.cancel_key_verification(args["transaction_id"], reject=True)
        return {}

    async def sas_result(self, args: dict[str, Any]) -> dict[str, Any]:
        assert self.client
        transaction_id = args["transaction_id"]

        def over() -> bool:
            sas = self.sas(transaction_id)
            return sas is not None and (sas.verified or sas.canceled)

        await self.wait_for(over, args.get("timeout", 60))
        sas = self.sas(transaction_id)
        other = sas.other_olm_device if sas else None
        device = self.device(other.user_id, other.id) if other else None
        return {
            "verified": bool(sas and sas.verified),
            "canceled": bool(sas and sas.canceled),
            "cancel_code": sas.cancel_code if sas and sas.canceled else None,
            "device_verified": bool(device and self.client.olm.is_device_verified(device)),
        }

    async def nio_version(self, args: dict[str, Any]) -> dict[str, Any]:
        from importlib.metadata import PackageNotFoundError, version

        try:
            version("vodozemac")
            crypto = "vodozemac"
        except PackageNotFoundError:
            crypto = "olm"
        return {"version": version("matrix-nio"), "crypto": crypto}

    async def quit(self) -> None:
        if self.sync_task:
            self.sync_task.cancel()
        if self.client:
            await self.client.close()


async def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=os.environ.get("SYMORVA_NIO_LOG_LEVEL", "WARNING"))
    peer = Peer()
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    pending: set[asyncio.Task[None]] = set()

    def answer(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    async def run(request: dict[str, Any]) -> None:
        op = request.get("op")
        try:
            handler = getattr(peer, op) if op in OPERATIONS else None
            if handler is None:
                raise RuntimeError(f"unknown op {op}")
            result = await handler(request)
            answer({"id": request.get("id"), "ok": True, **result})
        except Exception as error:  # noqa: BLE001 - every failure is the test's answer
            answer({"id": request.get("id"), "ok": False, "error": f"{type(error).__name__}: {error}"})

    while True:
        line = await reader.readline()
        if not line:
            break
        request = json.loads(line)
        if request.get("op") == "quit":
            break
        # Operations run concurrently (a wait does not hold up a send).
        task = asyncio.create_task(run(request))
        pending.add(task)
        task.add_done_callback(pending.discard)
    for task in pending:
        task.cancel()
    await peer.quit()


OPERATIONS = {
    "login",
    "create_room",
    "wait_invite",
    "join",
    "leave",
    "wait_member",
    "send",
    "send_file",
    "download_file",
    "messages",
    "devices",
    "verify",
    "request_keys",
    "forget_sessions",
    "typing",
    "wait_typing",
    "read",
    "wait_receipt",
    "knock",
    "hierarchy",
    "wait_device",
    "sas_start",
    "sas_incoming",
    "sas_accept",
    "sas_code",
    "sas_confirm",
    "sas_reject",
    "sas_result",
    "nio_version",
}

if __name__ == "__main__":
    asyncio.run(main())
