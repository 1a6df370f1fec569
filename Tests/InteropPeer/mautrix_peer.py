#!/usr/bin/env python3
"""A mautrix-python device driven by SymorvaKit's cross-signing interoperability tests.

mautrix (with its own libolm binding, python-olm) is an independent implementation of
cross-signing and secret storage (`m.secret_storage.v1.aes-hmac-sha2`, the base58 recovery
key). Each run signs in to the local Synapse as a new device of the given account, publishes
its device keys, does one thing and prints one JSON line on standard output:

  bootstrap   creates the account's cross-signing identity and secret storage with mautrix's
              `generate_recovery_key` (new master, self-signing and user-signing keys, uploaded;
              the seeds encrypted into account data under a new default key; this device signed)
              -> {"device_id", "master_key", "self_signing_key", "recovery_key"}
  verify      reads the recovery key from standard input (one line), fetches the cross-signing
              keys from secret storage with mautrix's `verify_with_recovery_key` (the key checked
              against the key description's MAC) and signs this device with the self-signing key
              -> {"device_id", "master_key", "self_signing_key"}
  backup-key  reads the recovery key from standard input and decrypts the key backup's private
              key (`m.megolm_backup.v1`) from secret storage with mautrix's SSSS machine, for a
              test that enables the backup with it through SymorvaKit's contract
              -> {"device_id", "backup_key"} (base64, as secret storage holds it)

The password is read from the SYMORVA_PEER_PASSWORD environment variable and the recovery key
from standard input, never from the command line; neither is ever printed except the recovery
key `bootstrap` made and the backup key `backup-key` read (the tests read them). Logging stays at warnings, on standard error.
"""

from __future__ import annotations

import argparse
import base64
import asyncio
import json
import logging
import os
import sys

from mautrix.client import Client
from mautrix.client.state_store.memory import MemoryStateStore
from mautrix.crypto import OlmMachine
from mautrix.crypto.store import StateStore as CryptoStateStore
from mautrix.crypto.store.memory import MemoryCryptoStore
from mautrix.types import RoomID, UserID


class StateStore(MemoryStateStore, CryptoStateStore):
    """The client's memory state store, with what the crypto machine asks of one (no rooms)."""

    async def is_encrypted(self, room_id: RoomID) -> bool:
        return False

    async def get_encryption_info(self, room_id: RoomID):
        return None

    async def find_shared_rooms(self, user_id: UserID) -> list[RoomID]:
        return []


async def signed_in_machine(homeserver: str, user: str, password: str) -> tuple[Client, OlmMachine]:
    state_store = StateStore()
    client = Client(base_url=homeserver, state_store=state_store)
    await client.login(identifier=user, password=password, device_name="mautrix interop peer")
    crypto_store = MemoryCryptoStore(account_id=client.mxid, pickle_key="mautrix interop peer")
    machine = OlmMachine(client, crypto_store, state_store)
    await machine.load()
    await machine.share_keys(0)
    return client, machine


async def run(args: argparse.Namespace) -> dict:
    password = os.environ.get("SYMORVA_PEER_PASSWORD")
    if not password:
        raise SystemExit("SYMORVA_PEER_PASSWORD is not set")
    client, machine = await signed_in_machine(args.homeserver, args.user, password)
    try:
        if args.operation == "bootstrap":
            recovery_key = await machine.generate_recovery_key()
            public = await machine.get_own_cross_signing_public_keys()
            return {
                "device_id": client.device_id,
                "master_key": public.master_key,
                "self_signing_key": public.self_signing_key,
                "recovery_key": recovery_key,
            }
        recovery_key = sys.stdin.readline().strip()
        if args.operation == "backup-key":
            key_id, key_data = await machine.ssss.get_default_key_data()
            ssss_key = key_data.verify_recovery_key(key_id, recovery_key)
            secret = await machine.ssss.get_decrypted_account_data("m.megolm_backup.v1", ssss_key)
            # mautrix answers the secret's bytes (it decodes the stored base64).
            return {"device_id": client.device_id, "backup_key": base64.b64encode(secret).decode()}
        await machine.verify_with_recovery_key(recovery_key)
        public = machine._cross_signing_public_keys
        return {
            "device_id": client.device_id,
            "master_key": public.master_key,
            "self_signing_key": public.self_signing_key,
        }
    finally:
        await client.api.session.close()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("operation", choices=["bootstrap", "verify", "backup-key"])
    parser.add_argument("--homeserver", required=True)
    parser.add_argument("--user", required=True, help="the account's user ID or localpart")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(run(args))), flush=True)


if __name__ == "__main__":
    main()
