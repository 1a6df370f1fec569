"""The Symorva client SDK from Python: ctypes over the C library (include/symorva.h), with an
asyncio API whose names follow the contract (contract/symorva.d.ts, docs/contract.md).

    client = await symorva.Client.open(manifest, data_directory, consent=..., pin_entry=...)
    account = await client.session.register("alice", password)
    room_id = await client.chat.create_room(name="Orbit")
    conversation = await client.chat.conversation(room_id)
    timeline = await conversation.timeline()          # an Observable, kept current
    receipt = await conversation.send("Hello")
    await client.close()

With `validate=True` (or SYMORVA_VALIDATE_SCHEMA=1 in the environment), every message from the
SDK is checked against contract/symorva.schema.json (symorva.schema): each answer's result
against its method's schema (and the params that succeeded against the params schema), each
subscription's value and update against its path's. A result that violates it fails the request
with SchemaViolation; any violation makes close() raise.
"""

import asyncio
import ctypes
import itertools
import json
import os
import threading
from pathlib import Path

__all__ = ["Client", "SymorvaError", "Observable", "execute", "library"]

_LOG_CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_library = None


def library():
    """The loaded libSymorvaFFI: $SYMORVA_FFI_LIB, else the package's debug or release build."""
    global _library
    if _library is not None:
        return _library
    candidates = [os.environ.get("SYMORVA_FFI_LIB")]
    root = Path(__file__).resolve().parents[3]
    for configuration in ("debug", "release"):
        candidates.append(str(root / ".build" / configuration / "libSymorvaFFI.so"))
    path = next((c for c in candidates if c and Path(c).exists()), None)
    if path is None:
        raise OSError("libSymorvaFFI not found: build it (swift build --product SymorvaFFI) or set SYMORVA_FFI_LIB")
    lib = ctypes.CDLL(path)
    lib.symorva_client_create.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    lib.symorva_client_create.restype = ctypes.c_int
    lib.symorva_client_send.argtypes = [ctypes.c_int, ctypes.c_char_p]
    lib.symorva_client_send.restype = ctypes.c_int
    # Returned strings are ours to free: c_void_p keeps the pointer for symorva_free.
    lib.symorva_client_receive.argtypes = [ctypes.c_int, ctypes.c_double]
    lib.symorva_client_receive.restype = ctypes.c_void_p
    lib.symorva_execute.argtypes = [ctypes.c_char_p]
    lib.symorva_execute.restype = ctypes.c_void_p
    lib.symorva_client_destroy.argtypes = [ctypes.c_int]
    lib.symorva_client_destroy.restype = None
    lib.symorva_free.argtypes = [ctypes.c_void_p]
    lib.symorva_free.restype = None
    lib.symorva_set_log_level.argtypes = [ctypes.c_int]
    lib.symorva_set_log_callback.argtypes = [_LOG_CALLBACK, ctypes.c_void_p]
    _library = lib
    return lib


def _take(pointer):
    """The text of a string the library returned, freed."""
    if not pointer:
        return None
    try:
        return ctypes.string_at(pointer).decode("utf-8")
    finally:
        library().symorva_free(pointer)


def execute(method, **params):
    """Runs a synchronous method (`message.split`, `amount.parse`) at once; raises SymorvaError."""
    answer = json.loads(_take(library().symorva_execute(json.dumps({"method": method, "params": params}).encode())))
    if "error" in answer:
        raise SymorvaError(answer["error"])
    return answer["result"]


_log_callback_ref = None


def set_log(level, callback=None):
    """Log lines of every client at `level` (0 trace … 5 error, 6 none) to `callback(level, line)`."""
    global _log_callback_ref
    lib = library()
    lib.symorva_set_log_level(level)
    if callback is None:
        _log_callback_ref = None
        lib.symorva_set_log_callback(_LOG_CALLBACK(), None)
        return
    _log_callback_ref = _LOG_CALLBACK(lambda lvl, line, _ctx: callback(lvl, line.decode("utf-8", "replace")))
    lib.symorva_set_log_callback(_log_callback_ref, None)


class SymorvaError(Exception):
    """A request's typed error: `domain`, `code` (the Swift case name), `message`, `details`."""

    def __init__(self, error):
        super().__init__(f"{error.get('domain')}.{error.get('code')}: {error.get('message')}")
        self.domain = error.get("domain")
        self.code = error.get("code")
        self.details = error.get("details")


class Observable:
    """A value the SDK observes: `value` is current; `subscribe(listener)` returns unsubscribe."""

    def __init__(self, client, subscription, value):
        self._client = client
        self.subscription = subscription
        self.value = value
        self._listeners = []
        self._changed = asyncio.Event()

    def subscribe(self, listener):
        self._listeners.append(listener)
        listener(self.value)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    async def wait_until(self, predicate, timeout=30):
        """Waits until `predicate(value)` holds; returns the value."""
        async def wait():
            while not predicate(self.value):
                self._changed.clear()
                await self._changed.wait()
            return self.value
        return await asyncio.wait_for(wait(), timeout)

    def _publish(self, value):
        self.value = value
        self._changed.set()
        for listener in list(self._listeners):
            listener(value)

    async def close(self):
        self._client._observed.pop(self.subscription, None)
        await self._client.request("unsubscribe", subscription=self.subscription)


class Client:
    """One community over the C library. Build it with `await Client.open(...)`."""

    @classmethod
    async def open(cls, manifest, data_directory, consent=None, pin_entry=None, validate=None):
        """`consent(sheet) -> "approved" | "declined"` and `pin_entry(summary) -> str | None` may
        be coroutines; they answer the SDK's host requests. `validate` checks every message
        against the contract's JSON Schema (default: $SYMORVA_VALIDATE_SCHEMA == "1")."""
        lib = library()
        loop = asyncio.get_running_loop()
        client_id = await loop.run_in_executor(
            None, lib.symorva_client_create, str(manifest).encode(), str(data_directory).encode())
        if client_id <= 0:
            raise SymorvaError({"domain": "contract", "code": "invalidManifest", "message": f"create failed ({client_id})"})
        client = cls(client_id, loop, consent, pin_entry)
        if validate if validate is not None else os.environ.get("SYMORVA_VALIDATE_SCHEMA") == "1":
            from .schema import Schema
            client._schema = Schema.load()
        client._build(await client.request("community.modules"))
        return client

    def __init__(self, client_id, loop, consent, pin_entry):
        self._id = client_id
        self._loop = loop
        self._consent = consent
        self._pin_entry = pin_entry
        self._ids = itertools.count(1)
        self._pending = {}
        self._observed = {}
        self._closed = asyncio.Event()
        self._schema = None
        self._sent = {}
        # Requests that subscribe: their answer registers the observable as it is dispatched, so
        # an update that arrives right behind it (the same read) is never dropped.
        self._subscribing = {}
        self._paths = {}
        self.schema_violations = []
        self._receiver = threading.Thread(target=self._receive_loop, name=f"symorva-{client_id}", daemon=True)
        self._receiver.start()

    def _receive_loop(self):
        lib = library()
        while True:
            text = _take(lib.symorva_client_receive(self._id, 0.5))
            if text is None:
                if self._closed_flag():
                    return
                continue
            message = json.loads(text)
            self._loop.call_soon_threadsafe(self._dispatch, message)
            if message.get("closed"):
                return

    def _closed_flag(self):
        return getattr(self, "_destroyed", False)

    def _violation(self, check, *arguments):
        """Runs a schema check; returns the violation (also kept in schema_violations) or None."""
        from .schema import SchemaViolation
        try:
            check(*arguments)
        except SchemaViolation as violation:
            self.schema_violations.append(str(violation))
            return violation
        return None

    def _check_answer(self, message):
        violation = self._violation(self._schema.check_message, message)
        sent = self._sent.pop(message["id"], None)
        if violation is not None or sent is None or "error" in message:
            return violation
        method, params = sent
        result = message["result"]
        if method == "subscribe":
            path = params.get("path")
            self._paths[result.get("subscription")] = path
            arguments = {key: value for key, value in params.items() if key != "path"}
            return (self._violation(self._schema.check_path_params, path, arguments)
                    or self._violation(self._schema.check_value, path, result.get("value")))
        return (self._violation(self._schema.check_params, method, params)
                or self._violation(self._schema.check_result, method, result))

    def _dispatch(self, message):
        if self._schema is not None and "id" in message:
            violation = self._check_answer(message)
            if violation is not None:
                future = self._pending.pop(message["id"], None)
                if future is not None and not future.done():
                    future.set_exception(violation)
                return
        elif self._schema is not None:
            self._violation(self._schema.check_message, message)
            if "update" in message:
                path = self._paths.get(message["update"]["subscription"])
                if path is not None:
                    self._violation(self._schema.check_value, path, message["update"]["value"])
        if "id" in message:
            future = self._pending.pop(message["id"], None)
            subscribing = self._subscribing.pop(message["id"], None) is not None
            if future is None or future.done():
                return
            if "error" in message:
                future.set_exception(SymorvaError(message["error"]))
            else:
                result = message["result"]
                if subscribing and isinstance(result, dict) and "subscription" in result:
                    self._observed[result["subscription"]] = Observable(self, result["subscription"], result.get("value"))
                future.set_result(result)
        elif "update" in message:
            observed = self._observed.get(message["update"]["subscription"])
            if observed is not None:
                observed._publish(message["update"]["value"])
        elif "hostRequest" in message:
            asyncio.ensure_future(self._answer_host(message["hostRequest"]))
        elif message.get("closed"):
            self._closed.set()
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(SymorvaError({"domain": "contract", "code": "closed", "message": "closed"}))
            self._pending.clear()

    async def _answer_host(self, request):
        handler = {"consent": self._consent, "pin": self._pin_entry}.get(request["kind"])
        answer = None
        if handler is not None:
            argument = request.get("sheet") if request["kind"] == "consent" else request.get("summary")
            answer = handler(argument)
            if asyncio.iscoroutine(answer):
                answer = await answer
        try:
            await self.request("host.answer", request=request["id"], answer=answer)
        except SymorvaError:
            pass

    def send_raw(self, text):
        """Sends raw bytes as one request (tests of bad input); returns the C status."""
        data = text if isinstance(text, bytes) else text.encode()
        return library().symorva_client_send(self._id, data)

    def request(self, method, **params):
        """Sends one request; resolves with its result, raises SymorvaError."""
        request_id = next(self._ids)
        future = self._loop.create_future()
        self._pending[request_id] = future
        if method == "subscribe":
            self._subscribing[request_id] = True
        if self._schema is not None:
            self._sent[request_id] = (method, params)
        status = library().symorva_client_send(self._id, json.dumps({"id": request_id, "method": method, "params": params}).encode())
        if status != 0:
            self._pending.pop(request_id, None)
            self._subscribing.pop(request_id, None)
            raise SymorvaError({"domain": "contract", "code": "closed", "message": f"send failed ({status})"})
        return future

    async def observe(self, path, **params):
        """Subscribes to an observable path (`chat.conversations`, `conversation.timeline`, …)."""
        answer = await self.request("subscribe", path=path, **params)
        # Registered when the answer was dispatched (with any update that followed it applied).
        observed = self._observed.get(answer["subscription"])
        if observed is None:
            observed = Observable(self, answer["subscription"], answer["value"])
            self._observed[answer["subscription"]] = observed
        return observed

    async def close(self):
        """Destroys the client (every session stops); later requests fail `closed`."""
        self._destroyed = True
        await self._loop.run_in_executor(None, library().symorva_client_destroy, self._id)
        # Messages not received by now are dropped (include/symorva.h): the client is closed.
        if not self._closed.is_set():
            self._dispatch({"closed": True})
        await self._loop.run_in_executor(None, self._receiver.join, 5)
        if self.schema_violations:
            raise AssertionError("messages the contract's schema refuses: " + "; ".join(self.schema_violations))

    def _build(self, modules):
        self.session = _Session(self)
        self.chat = _Chat(self)
        self.meetings = _Meetings(self)
        self.wallet = _Wallet(self) if modules["wallet"] else None
        self.ai_studio = _Studio(self) if modules["aiStudio"] else None
        self.directory = _Directory(self) if modules["directory"] else None
        self.public_rooms = _PublicRooms(self)
        self.push = _Push(self)
        self.encryption = _Encryption(self)


class _Session:
    def __init__(self, client):
        self._c = client

    async def sign_in(self, username, password):
        return await self._c.request("session.signIn", username=username, password=password)

    async def register(self, username, password):
        return await self._c.request("session.register", username=username, password=password)

    async def sign_out(self):
        await self._c.request("session.signOut")

    async def switch_account(self, user_id):
        return await self._c.request("session.switchAccount", userID=user_id)

    async def state(self):
        return await self._c.observe("session.state")

    async def devices(self):
        return await self._c.request("session.devices")

    async def rename_device(self, device_id, name):
        await self._c.request("session.renameDevice", deviceID=device_id, name=name)

    async def remove_device(self, device_id, password):
        await self._c.request("session.removeDevice", deviceID=device_id, password=password)


class _Conversation:
    def __init__(self, client, opened):
        self._c = client
        self.id = opened["roomID"]
        self.handle = opened["conversation"]

    async def send(self, text, kind="text"):
        return await self._c.request("chat.conversation.send", conversation=self.handle, text=text, kind=kind)

    async def paginate_backwards(self, count=20):
        return await self._c.request("chat.conversation.paginateBackwards", conversation=self.handle, count=count)

    async def timeline(self):
        return await self._c.observe("conversation.timeline", conversation=self.handle)

    async def encryption(self):
        return await self._c.observe("conversation.encryption", conversation=self.handle)

    async def enable_encryption(self):
        await self._c.request("chat.conversation.enableEncryption", conversation=self.handle)

    async def send_attachment(self, path, content_type, **options):
        """Sends the file at `path` (copied when queued); options: kind, fileName, caption,
        width, height, durationMs. Answers the send receipt; `uploads()` shows the progress."""
        return await self._c.request(
            "chat.conversation.sendAttachment", conversation=self.handle, path=path, contentType=content_type,
            **options)

    async def uploads(self):
        return await self._c.observe("conversation.uploads", conversation=self.handle)

    async def resend(self, transaction_id):
        await self._c.request("chat.conversation.resend", conversation=self.handle, transactionID=transaction_id)

    async def cancel_send(self, transaction_id):
        await self._c.request("chat.conversation.cancelSend", conversation=self.handle, transactionID=transaction_id)

    async def download(self, event_id, path, thumbnail=False):
        """Saves the file of message `event_id` (its sender's thumbnail with `thumbnail`) to
        `path`; answers the bytes written."""
        answer = await self._c.request(
            "chat.conversation.download", conversation=self.handle, eventID=event_id, path=path, thumbnail=thumbnail)
        return answer["size"]


class _Chat:
    def __init__(self, client):
        self._c = client

    async def conversations(self):
        return await self._c.observe("chat.conversations")

    async def create_room(self, **options):
        return (await self._c.request("chat.createRoom", **options))["roomID"]

    async def join(self, room_id_or_alias):
        return (await self._c.request("chat.join", roomIDOrAlias=room_id_or_alias))["roomID"]

    async def invite(self, user_id, room_id):
        await self._c.request("chat.invite", userID=user_id, roomID=room_id)

    async def leave(self, room_id):
        await self._c.request("chat.leave", roomID=room_id)

    async def kick(self, user_id, room_id, reason=None):
        await self._c.request("chat.kick", userID=user_id, roomID=room_id, reason=reason)

    async def ban(self, user_id, room_id, reason=None):
        await self._c.request("chat.ban", userID=user_id, roomID=room_id, reason=reason)

    async def set_join_rule(self, room_id, rule, allowed_rooms=None):
        await self._c.request("chat.setJoinRule", roomID=room_id, rule=rule, allowedRooms=allowed_rooms)

    async def set_room_name(self, room_id, name):
        await self._c.request("chat.setRoomName", roomID=room_id, name=name)

    async def set_room_topic(self, room_id, topic):
        await self._c.request("chat.setRoomTopic", roomID=room_id, topic=topic)

    async def set_room_avatar(self, room_id, path, content_type):
        return (await self._c.request("chat.setRoomAvatar", roomID=room_id, path=path,
                                      contentType=content_type))["avatarURL"]

    async def set_history_visibility(self, room_id, visibility):
        await self._c.request("chat.setHistoryVisibility", roomID=room_id, visibility=visibility)

    async def set_power_level(self, room_id, user_id, level):
        await self._c.request("chat.setPowerLevel", roomID=room_id, userID=user_id, level=level)

    async def knock(self, room_id_or_alias, reason=None, via=None):
        return (await self._c.request("chat.knock", roomIDOrAlias=room_id_or_alias, reason=reason,
                                      via=via or []))["roomID"]

    async def knocks(self, room_id):
        return (await self._c.request("chat.knocks", roomID=room_id))["userIDs"]

    async def accept_knock(self, room_id, user_id):
        await self._c.request("chat.acceptKnock", roomID=room_id, userID=user_id)

    async def deny_knock(self, room_id, user_id, reason=None):
        await self._c.request("chat.denyKnock", roomID=room_id, userID=user_id, reason=reason)

    async def set_display_name(self, name):
        await self._c.request("chat.setDisplayName", name=name)

    async def set_avatar(self, path, content_type):
        return (await self._c.request("chat.setAvatar", path=path, contentType=content_type))["avatarURL"]

    async def ignore(self, user_id):
        await self._c.request("chat.ignore", userID=user_id)

    async def unignore(self, user_id):
        await self._c.request("chat.unignore", userID=user_id)

    async def ignored_users(self):
        return (await self._c.request("chat.ignoredUsers"))["userIDs"]

    async def joined_spaces(self):
        return await self._c.request("chat.joinedSpaces")

    async def rooms_of_space(self, space_id):
        return await self._c.request("chat.roomsOfSpace", spaceID=space_id)

    async def create_space(self, name, topic=None, is_public=False):
        return (await self._c.request("chat.createSpace", name=name, topic=topic, isPublic=is_public))["roomID"]

    async def add_to_space(self, room_id, space_id, via=None, suggested=False):
        await self._c.request("chat.addToSpace", roomID=room_id, spaceID=space_id, via=via, suggested=suggested)

    async def remove_from_space(self, room_id, space_id):
        await self._c.request("chat.removeFromSpace", roomID=room_id, spaceID=space_id)

    async def join_via(self, room_id, via):
        return (await self._c.request("chat.joinVia", roomID=room_id, via=via))["roomID"]

    async def hierarchy(self, space_id, page_size=50):
        return _Hierarchy(self._c, await self._c.request("chat.hierarchy", spaceID=space_id, pageSize=page_size))

    async def community_rooms(self, page_size=50):
        return _Hierarchy(self._c, await self._c.request("chat.communityRooms", pageSize=page_size))

    async def conversation(self, room_id):
        return _Conversation(self._c, await self._c.request("chat.conversation", roomID=room_id))


class _Draft:
    def __init__(self, client, draft):
        self._c = client
        self.handle = draft["draft"]
        self.summary = draft["summary"]

    async def confirm(self, pin=None):
        params = {"draft": self.handle} if pin is None else {"draft": self.handle, "pin": pin}
        return await self._c.request("draft.confirm", **params)

    async def cancel(self):
        await self._c.request("draft.cancel", draft=self.handle)


class _Wallet:
    def __init__(self, client):
        self._c = client

    async def refresh_balances(self):
        return await self._c.request("wallet.refreshBalances")

    async def set_pin(self, pin, old_pin=None):
        params = {"pin": pin} if old_pin is None else {"pin": pin, "oldPIN": old_pin}
        await self._c.request("wallet.setPIN", **params)

    async def prepare_transfer(self, recipient, asset, amount):
        return _Draft(self._c, await self._c.request("wallet.prepareTransfer", recipient=recipient, asset=asset, amount=amount))

    async def query(self, pending):
        """Queries a pending command (`outcome["pending"]`); never resubmits."""
        return await self._c.request("pending.query", pending=pending["pending"])


class _Room:
    def __init__(self, client, room):
        self._c = client
        self.handle = room["room"]
        self.room_id = room["roomID"]
        self.role = room["role"]

        self.media = _StageMedia(client, self.handle)
        self.playback = _Playback(client, self.handle)

    async def raise_hand(self):
        await self._c.request("room.raiseHand", room=self.handle)

    async def lower_hand(self):
        await self._c.request("room.lowerHand", room=self.handle)

    async def leave(self):
        await self._c.request("room.leave", room=self.handle)


class _StageMedia:
    """A stage member's media session (`meetings.wrongRole` while the member listens)."""

    def __init__(self, client, handle):
        self._c = client
        self._handle = handle

    async def state(self):
        return await self._c.observe("meeting.media", room=self._handle)

    async def audio_levels(self):
        return await self._c.observe("meeting.audioLevels", room=self._handle)

    async def connect(self):
        await self._c.request("room.media.connect", room=self._handle)

    async def set_microphone_enabled(self, enabled):
        await self._c.request("room.media.setMicrophoneEnabled", room=self._handle, enabled=enabled)

    async def disconnect(self):
        await self._c.request("room.media.disconnect", room=self._handle)


class _Playback:
    """A listener's playback of the meeting's mix (`meetings.wrongRole` while on stage)."""

    def __init__(self, client, handle):
        self._c = client
        self._handle = handle

    async def state(self):
        return await self._c.observe("meeting.playback", room=self._handle)

    async def play(self):
        await self._c.request("room.playback.play", room=self._handle)

    async def pause(self):
        await self._c.request("room.playback.pause", room=self._handle)

    async def stop(self):
        await self._c.request("room.playback.stop", room=self._handle)


class _Meetings:
    def __init__(self, client):
        self._c = client

    async def join(self, room_id, broadcast=False, tone=None):
        params = {"roomID": room_id, "broadcast": broadcast, **({"tone": tone} if tone is not None else {})}
        return _Room(self._c, await self._c.request("meetings.join", **params))


class _Studio:
    def __init__(self, client):
        self._c = client

    async def request_grant(self, room_id, scope):
        return await self._c.request("studio.requestGrant", roomID=room_id, scope=scope)

    async def summarize(self, grant):
        return await self._c.request("studio.summarize", grant=grant["grant"])

    async def revoke(self, grant):
        await self._c.request("studio.revoke", grant=grant["grant"])


class _Directory:
    def __init__(self, client):
        self._c = client

    async def member(self, user_id):
        return await self._c.request("directory.member", userID=user_id)

    async def refresh_own_profile(self):
        return await self._c.request("directory.refreshOwnProfile")

    async def assign_role(self, role, user_id):
        return (await self._c.request("directory.assignRole", role=role, userID=user_id))["changed"]

    async def remove_role(self, role, user_id):
        return (await self._c.request("directory.removeRole", role=role, userID=user_id))["changed"]

    async def members(self, role=None, page_size=20):
        params = {"pageSize": page_size, **({"role": role} if role is not None else {})}
        return _Search(self._c, await self._c.request("directory.searchMembers", **params))

    async def users(self, page_size=20):
        return _Search(self._c, await self._c.request("directory.searchUsers", pageSize=page_size))


class _PublicRooms:
    """The homeserver's room directory (every community has it, whatever its modules)."""

    def __init__(self, client):
        self._c = client

    async def search(self, server=None, page_size=20):
        params = {"pageSize": page_size, **({"server": server} if server is not None else {})}
        return _Search(self._c, await self._c.request("publicRooms.search", **params))

    async def resolve(self, alias):
        return (await self._c.request("publicRooms.resolve", alias=alias))["roomID"]

    async def join(self, room_id_or_alias):
        return (await self._c.request("publicRooms.join", roomIDOrAlias=room_id_or_alias))["roomID"]

    async def is_published(self, room_id):
        return (await self._c.request("publicRooms.isPublished", roomID=room_id))["published"]

    async def set_published(self, room_id, published):
        await self._c.request("publicRooms.setPublished", roomID=room_id, published=published)


class _Search:
    """A search of one directory behind a handle: the latest term's results, paged."""

    def __init__(self, client, opened):
        self._c = client
        self.handle = opened["search"]

    async def results(self):
        return await self._c.observe("search.results", search=self.handle)

    async def search(self, term=""):
        return await self._c.request("search.run", search=self.handle, term=term)

    async def update(self, term):
        await self._c.request("search.update", search=self.handle, term=term)

    async def load_more(self):
        return await self._c.request("search.loadMore", search=self.handle)

    async def refresh(self):
        await self._c.request("search.refresh", search=self.handle)

    async def clear(self):
        await self._c.request("search.clear", search=self.handle)


class _Push:
    """Push notifications: this installation's pusher, push rules, pushed events, counts."""

    def __init__(self, client):
        self._c = client

    async def counts(self):
        return await self._c.observe("push.counts")

    async def gateway(self):
        return await self._c.request("push.gateway")

    async def set_pusher(self, pushkey, app_id, app_display_name, device_display_name, **options):
        return await self._c.request("push.setPusher", pushkey=pushkey, appID=app_id,
                                     appDisplayName=app_display_name, deviceDisplayName=device_display_name, **options)

    async def pushers(self):
        return await self._c.request("push.pushers")

    async def pusher_state(self):
        return await self._c.request("push.pusherState")

    async def remove_pusher(self):
        await self._c.request("push.removePusher")

    async def rules(self):
        return await self._c.request("push.rules")

    async def add_keyword(self, keyword):
        await self._c.request("push.addKeyword", keyword=keyword)

    async def remove_keyword(self, keyword):
        await self._c.request("push.removeKeyword", keyword=keyword)

    async def set_rule_enabled(self, kind, rule_id, enabled):
        await self._c.request("push.setRuleEnabled", kind=kind, ruleID=rule_id, enabled=enabled)

    async def event(self, room_id, event_id):
        return await self._c.request("push.event", roomID=room_id, eventID=event_id)


class _Encryption:
    """Encryption management of the active account: identity and recovery, the key backup, the
    devices of users and their trust."""

    def __init__(self, client):
        self._c = client

    async def identity(self):
        return await self._c.observe("encryption.identity")

    async def backup(self):
        return await self._c.observe("encryption.backup")

    async def identity_state(self):
        return await self._c.request("encryption.identityState")

    async def set_up_recovery(self, passphrase=None):
        return (await self._c.request("encryption.recovery.setUp", passphrase=passphrase))["recoveryKey"]

    async def restore_recovery(self, recovery_key, is_passphrase=False):
        return (await self._c.request("encryption.recovery.restore", recoveryKey=recovery_key,
                                      isPassphrase=is_passphrase))["backup"]

    async def reset_recovery(self, password, passphrase=None):
        return (await self._c.request("encryption.recovery.reset", password=password,
                                      passphrase=passphrase))["recoveryKey"]

    async def backup_status(self):
        return await self._c.request("encryption.backup.status")

    async def check_backup(self):
        return await self._c.request("encryption.backup.check")

    async def create_backup(self):
        return (await self._c.request("encryption.backup.create"))["version"]

    async def enable_backup(self, private_key):
        return (await self._c.request("encryption.backup.enable", privateKey=private_key))["version"]

    async def restore_backup(self):
        return await self._c.request("encryption.backup.restore")

    async def delete_backup(self):
        await self._c.request("encryption.backup.delete")

    async def devices(self, user_id):
        return await self._c.request("encryption.devices", userID=user_id)

    async def identity_changed(self, user_id):
        return (await self._c.request("encryption.identityChanged", userID=user_id))["changed"]

    async def acknowledge_identity_change(self, user_id):
        return (await self._c.request("encryption.acknowledgeIdentityChange", userID=user_id))["acknowledged"]

    async def verify(self, user_id, device_id=None, start_directly=False):
        """Starts an interactive verification of `user_id` (`device_id`, else every device);
        answers a `Verification`."""
        params = {"userID": user_id, "startDirectly": start_directly}
        if device_id is not None:
            params["deviceID"] = device_id
        return Verification(self._c, await self._c.request("verification.start", **params))

    async def incoming_verification(self):
        """The last verification another device started (a `VerificationInfo` or None);
        `verification(info)` answers it."""
        return await self._c.observe("verification.incoming")

    def verification(self, info):
        return Verification(self._c, info)


class Verification:
    """One interactive verification (emoji or decimals): observe `state()`, answer with the
    person's choices."""

    def __init__(self, client, info):
        self._c = client
        self.handle = info["verification"]
        self.transaction_id = info["transactionID"]
        self.other_user_id = info["otherUserID"]

    async def state(self):
        return await self._c.observe("verification.state", verification=self.handle)

    async def accept(self):
        await self._c.request("verification.accept", verification=self.handle)

    async def start_sas(self):
        await self._c.request("verification.startSAS", verification=self.handle)

    async def confirm(self):
        await self._c.request("verification.confirm", verification=self.handle)

    async def mismatch(self):
        await self._c.request("verification.mismatch", verification=self.handle)

    async def cancel(self):
        await self._c.request("verification.cancel", verification=self.handle)


class _Hierarchy:
    """A space's hierarchy, paged from the server."""

    def __init__(self, client, info):
        self._c = client
        self.handle = info["hierarchy"]
        self.space_id = info["spaceID"]

    async def state(self):
        return await self._c.observe("hierarchy.state", hierarchy=self.handle)

    async def load_next_page(self):
        return await self._c.request("hierarchy.loadNextPage", hierarchy=self.handle)
