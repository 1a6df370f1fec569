"""SAS (`m.sas.v1`) checks against vodozemac, an implementation independent of libolm.

    python Tests/InteropPeer/sas_vectors.py      (with the interop venv's python)

A line protocol on standard input and output, so that a test drives one exchange with fresh keys:
  1. prints vodozemac's SAS public key (unpadded base64), one line;
  2. reads the other side's public key, one line, and the HKDF info of the SAS bytes, one line;
     prints the emoji indices and the decimals vodozemac derives, comma-separated, one line each;
  3. then, for every further pair of lines (MAC input, MAC info), prints the
     `hkdf-hmac-sha256.v2` MAC and the legacy `hkdf-hmac-sha256` MAC, one line each.
"""

import sys

import vodozemac


def read_line() -> str:
    line = sys.stdin.readline()
    if not line:
        raise SystemExit(0)
    return line.rstrip("\n")


def main() -> None:
    sas = vodozemac.Sas()
    print(sas.public_key.to_base64(), flush=True)
    their_key = vodozemac.Curve25519PublicKey.from_base64(read_line())
    established = sas.diffie_hellman(their_key)
    sas_bytes = established.bytes(read_line())
    print(",".join(str(index) for index in sas_bytes.emoji_indices), flush=True)
    print(",".join(str(number) for number in sas_bytes.decimals), flush=True)
    while True:
        text = read_line()
        info = read_line()
        print(established.calculate_mac(text, info), flush=True)
        print(established.calculate_mac_invalid_base64(text, info), flush=True)


if __name__ == "__main__":
    main()
