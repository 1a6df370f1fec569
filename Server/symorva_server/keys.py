"""The server's X25519 sealing keypair (libsodium sealed boxes, crypto_box_seal).

Clients seal secrets to the public key (published in the wallet capabilities); only
this server can open them. Generated once and kept in the database.
"""

from __future__ import annotations

import base64
import hashlib

from nacl.public import PrivateKey, SealedBox

from .db import Database

MIGRATIONS = [
    """
    CREATE TABLE server_keys (
        name TEXT PRIMARY KEY,
        private_key TEXT NOT NULL,
        created_at_ms INTEGER NOT NULL
    )
    """,
]

ALGORITHM = "x25519-xsalsa20poly1305-sealedbox"


class SealingKey:
    def __init__(self, private_key: PrivateKey) -> None:
        self.private_key = private_key

    @property
    def public_key_b64(self) -> str:
        return base64.b64encode(bytes(self.private_key.public_key)).decode()

    @property
    def key_id(self) -> str:
        return hashlib.sha256(bytes(self.private_key.public_key)).hexdigest()[:16]

    def open(self, sealed: bytes) -> bytes:
        return SealedBox(self.private_key).decrypt(sealed)

    def public_info(self) -> dict:
        return {"algorithm": ALGORITHM, "key_id": self.key_id, "public_key": self.public_key_b64}


def load_or_create_sealing_key(db: Database, now_ms: int, name: str = "sealing") -> SealingKey:
    db.migrate("keys", MIGRATIONS)
    with db.transaction() as conn:
        row = conn.execute("SELECT private_key FROM server_keys WHERE name = ?", (name,)).fetchone()
        if row is None:
            key = PrivateKey.generate()
            conn.execute(
                "INSERT INTO server_keys(name, private_key, created_at_ms) VALUES (?, ?, ?)",
                (name, base64.b64encode(bytes(key)).decode(), now_ms),
            )
        else:
            key = PrivateKey(base64.b64decode(row[0]))
    return SealingKey(key)
