"""Backup-encryption vectors from vodozemac, an implementation independent of libolm.

    python Tests/InteropPeer/backup_vectors.py      (with the interop venv's python)

Encrypts a fixed plaintext for the RFC 7748 section 6.1 Alice key with vodozemac's PkEncryption
(`m.megolm_backup.v1.curve25519-aes-sha2`) and prints the parts as unpadded base64. The
ephemeral key is random, so each run prints a new, equally valid vector;
Tests/SymorvaAdapterTests/Crypto/OlmPkTests.swift holds one run's output, which libolm must
decrypt. With `--decrypt CIPHERTEXT MAC EPHEMERAL` it decrypts an entry for the same key instead
and prints the plaintext (the reverse direction).

For the key backup's interoperability tests, keys and plaintexts come on standard input (never
on the command line):
    --decrypt-stdin   lines: the backup's private key (unpadded base64), ciphertext, mac,
                      ephemeral; prints the plaintext
    --encrypt-stdin   first line: the backup's public key (unpadded base64); the rest is the
                      plaintext; prints ciphertext, mac and ephemeral, one a line
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
    if sys.argv[1:] == ["--decrypt-stdin"]:
        private, ciphertext, mac, ephemeral = sys.stdin.read().split("\n")[:4]
        key = vodozemac.Curve25519SecretKey.from_bytes(unpadded_decode(private))
        message = vodozemac.Message(*(unpadded_decode(part) for part in (ciphertext, mac, ephemeral)))
        sys.stdout.write(vodozemac.PkDecryption.from_key(key).decrypt(message).decode())
        return
    if sys.argv[1:] == ["--encrypt-stdin"]:
        public, _, plaintext = sys.stdin.read().partition("\n")
        encryption = vodozemac.PkEncryption.from_key(vodozemac.Curve25519PublicKey.from_base64(public))
        message = encryption.encrypt(plaintext.encode())
        for part in (message.ciphertext, message.mac, message.ephemeral_key):
            print(unpadded_encode(part))
        return
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
