#!/usr/bin/env python3
"""The contract's per-method JSON Schemas, checked without servers (Scripts/contract-test --unit,
standard library only): contract/symorva.schema.json uses only the keywords
clients/python/symorva/schema.py reads, every method and path has its schemas, and they accept
the shapes docs/contract.md gives and refuse wrong ones. The Python client's integration tests
then validate every real answer and update against the same schemas."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from symorva.schema import Schema, SchemaViolation  # noqa: E402

schema = Schema.load()
defs = schema.document["$defs"]
failures = []


def accepts(check, *arguments):
    try:
        check(*arguments)
    except SchemaViolation as violation:
        failures.append(f"refused what it should accept: {violation}")


def refuses(check, *arguments):
    try:
        check(*arguments)
    except SchemaViolation:
        return
    failures.append(f"accepted what it should refuse: {check.__name__}{arguments}")


for name, entry in defs["methods"].items():
    if set(entry) != {"params", "result"}:
        failures.append(f"method {name}: {sorted(entry)}")
for name, entry in defs["paths"].items():
    if set(entry) != {"params", "value"}:
        failures.append(f"path {name}: {sorted(entry)}")
methods = set(defs["method"]["enum"])
if methods != set(defs["methods"]):
    failures.append(f"method names and method schemas differ: {sorted(methods ^ set(defs['methods']))}")

accepts(schema.check_params, "chat.kick", {"roomID": "!a:b", "userID": "@c:d", "reason": None})
refuses(schema.check_params, "chat.kick", {"roomID": "!a:b"})
refuses(schema.check_params, "chat.conversation.send", {"conversation": "conversation-1", "text": 42})
refuses(schema.check_params, "chat.setHistoryVisibility", {"roomID": "!a:b", "visibility": "everyone"})
accepts(schema.check_params, "session.signOut", {})
refuses(schema.check_params, "session.signOut", {"extra": 1})
accepts(schema.check_result, "draft.confirm", {
    "kind": "failed", "reason": {"kind": "wrongPIN", "attemptsLeft": 2}})
accepts(schema.check_result, "draft.confirm", {
    "kind": "unknown", "pending": {"pending": "pending-4", "commandID": "c", "summary": {"draftID": "d",
        "recipient": "@b:c", "asset": {"code": "ORB", "precision": 2}, "amount": {"value": "1.00", "precision": 2},
        "fee": {"value": "0.00", "precision": 2}, "total": {"value": "1.00", "precision": 2}}}})
refuses(schema.check_result, "draft.confirm", {"kind": "maybe"})
accepts(schema.check_result, "encryption.identityState", {"kind": "identityChanged", "userID": "@a:b"})
refuses(schema.check_result, "encryption.identityState", {"kind": "identityChanged"})
accepts(schema.check_result, "encryption.backup.status", {"version": None, "waiting": 0, "stopReason": None})
refuses(schema.check_result, "encryption.backup.status", {"version": "1", "waiting": "0", "stopReason": None})
accepts(schema.check_result, "session.devices", [{
    "deviceID": "D", "displayName": None, "lastSeen": None, "isCurrent": True, "ed25519Key": None,
    "keysChanged": False, "trust": None}])
accepts(schema.check_params, "chat.conversation.sendAttachment", {
    "conversation": "conversation-1", "path": "/tmp/a.png", "contentType": "image/png", "kind": "image"})
refuses(schema.check_params, "chat.conversation.sendAttachment", {
    "conversation": "conversation-1", "path": "/tmp/a", "contentType": "x/y", "kind": "sticker"})
accepts(schema.check_value, "conversation.uploads", [{"transactionID": "t", "completedBytes": 5, "totalBytes": 10}])
refuses(schema.check_value, "conversation.uploads", [{"transactionID": "t"}])
accepts(schema.check_value, "verification.state", {
    "kind": "showingCode", "emoji": [{"character": "\U0001F436", "description": "Dog"}], "decimals": [1234, 5678, 9012]})
refuses(schema.check_value, "verification.state", {"kind": "showingCode", "emoji": []})
accepts(schema.check_value, "verification.incoming", None)
accepts(schema.check_message, {"id": 3, "error": {"domain": "verification", "code": "notReady", "message": "m"}})
accepts(schema.check_value, "session.state", {"kind": "signedOut"})
refuses(schema.check_value, "session.state", {"kind": "signedIn"})
accepts(schema.check_message, {"id": 3, "error": {"domain": "encryption", "code": "notReady", "message": "m"}})
refuses(schema.check_message, {"id": 3, "error": {"domain": "somewhere", "code": "x", "message": "m"}})
accepts(schema.check_message, {"update": {"subscription": "sub-1", "value": [1]}})
accepts(schema.check_message, {"closed": True})

if failures:
    sys.exit("check_schema: " + "\n  ".join(failures))
print(f"check_schema: {len(defs['methods'])} methods and {len(defs['paths'])} paths have schemas; "
      "the samples are accepted and refused as they should be")
