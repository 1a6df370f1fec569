"""python -m symorva_server.write_manifest PATH --homeserver URL --server-name NAME --services URL
[--admin USER_ID ...] [--starting-balance CODE=AMOUNT ...]

Writes the development community manifest (symorva.config.json); used by Scripts/dev-server.
It is marked `services.development: true`, with `services.admins` (default
`@admin:<server name>`, the dev environment's Synapse admin) and, when given, the wallet's
`startingBalances` (what every new wallet is credited with in development mode; Scripts/dev-server
passes `ORB=100.00` outside test mode, so that a newcomer can make a first transfer at once).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .config import default_manifest, validate_manifest


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m symorva_server.write_manifest")
    p.add_argument("path")
    p.add_argument("--homeserver", required=True)
    p.add_argument("--server-name", required=True)
    p.add_argument("--services", required=True)
    p.add_argument("--community-name", default=None)
    p.add_argument("--admin", action="append", default=None, metavar="USER_ID",
                   help="A community admin (repeatable; default @admin:SERVER_NAME, the dev environment's "
                        "Synapse admin)")
    p.add_argument("--starting-balance", action="append", default=[], metavar="CODE=AMOUNT",
                   help="What every new wallet is credited with in development mode (repeatable), "
                        "e.g. ORB=100.00")
    p.add_argument("--stage-capacity", type=int, default=2,
                   help="The meetings' stage capacity (manifest modules.meetings.stageCapacity, default %(default)s: "
                        "the third member of a meeting listens)")
    a = p.parse_args(argv)
    m = default_manifest(a.homeserver, a.server_name, a.services)
    if a.community_name:
        m["community"]["name"] = a.community_name
    # The development environment: development-only endpoints (the admin credit) are on, and
    # its Synapse admin is the community's admin.
    m["services"]["development"] = True
    m["services"]["admins"] = a.admin if a.admin is not None else [f"@admin:{a.server_name}"]
    if a.starting_balance:
        starting = dict(item.partition("=")[::2] for item in a.starting_balance)
        m["modules"]["wallet"]["startingBalances"] = starting
    m["modules"]["meetings"]["stageCapacity"] = a.stage_capacity
    validate_manifest(m)
    tmp = f"{a.path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(m, f, indent=2)
        f.write("\n")
    os.replace(tmp, a.path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
