"""Backup-encryption vectors from vodozemac, an implementation independent of libolm.

    python Tests/InteropPeer/backup_vectors.py      (with the interop venv's python)

Encrypts a fixed plaintext for the RFC 7748 section 6.1 Alice key with vodozemac's PkEncryption
(`m.megolm_backup.v1.curve25519-aes-sha2`) and prints the parts as unpadded base64. The
ephemeral key is random, so each run prints a new, equally valid vector;
Tests/SymorvaAdapterTests/Crypto/OlmPkTests.swift holds one run's output, which libolm must
decrypt. With `--decrypt CIPHERTEXT MAC EPHEMERAL` it decrypts an entry for the same key instead
and prints the plaintext (the reverse direction).
"""

import base64
import sys

import vodozemac

ALICE_PRIVATE = bytes.fromhex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
PLAINTEXT = (
    b'{"algorithm":"m.megolm.v1.aes-sha2","sender_key":"vodozemac",'
    b'"session_key":"not a real key","sender_claimed_keys":{},"forwarding_curve25519_key_chain":[]}'
)


def unpadded_encode(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def unpadded_decode(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4))


def main() -> None:
    secret = vodozemac.Curve25519SecretKey.from_bytes(ALICE_PRIVATE)
    if len(sys.argv) == 5 and sys.argv[1] == "--decrypt":
        # Message(ciphertext, mac, ephemeral_key) from raw bytes: vodozemac 0.10's base64
        # helpers order their parts differently from their documentation.
        message = vodozemac.Message(*(unpadded_decode(part) for part in sys.argv[2:5]))
        sys.stdout.write(vodozemac.PkDecryption.from_key(secret).decrypt(message).decode())
        return
    message = vodozemac.PkEncryption.from_key(secret.public_key()).encrypt(PLAINTEXT)
    ciphertext, mac, ephemeral = (
        unpadded_encode(part) for part in (message.ciphertext, message.mac, message.ephemeral_key)
    )
    print(f"public_key {secret.public_key().to_base64()}")
    print(f"ciphertext {ciphertext}")
    print(f"mac {mac}")
    print(f"ephemeral {ephemeral}")


if __name__ == "__main__":
    main()
