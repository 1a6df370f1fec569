"""Small helpers for Scripts/dev-server (stdlib only, any python3 >= 3.8).

    free-ports STATE_JSON            print two distinct free ports (homeserver, services), preferring
                                     the ones recorded in STATE_JSON by the previous start
    summary STATE_JSON ENV_FILE      print the human summary of a running environment
    wait NAME URL PID [NAME URL PID...] --timeout S
                                     poll each URL until it answers 200; fail fast when a PID dies
    json-get FILE KEY.PATH...        print values from a JSON file, one per line (empty if missing)
    write-state STATE_JSON ENV_FILE KEY=VALUE...
                                     writes both files atomically (values from KEY=VALUE args)
    random-secret                    print a URL-safe random secret
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import sys
import time
import urllib.error
import urllib.request


def free_port(preferred: str | None) -> int:
    if preferred:
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                # Like the servers do, so a port in TIME_WAIT counts as free.
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", int(preferred)))
            return int(preferred)
        except (OSError, ValueError):
            pass
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_ports(state_path: str) -> list[int]:
    prev: dict = {}
    try:
        with open(state_path, encoding="utf-8") as f:
            prev = json.load(f)
    except (OSError, ValueError):
        pass
    hs = free_port(str(prev.get("homeserver", {}).get("port", "")))
    svc = free_port(str(prev.get("services", {}).get("port", "")))
    while svc == hs:
        svc = free_port(None)
    return [hs, svc]


def summary(state_path: str, env_path: str) -> int:
    with open(state_path, encoding="utf-8") as f:
        s = json.load(f)
    mode = " (test mode)" if s.get("testMode") else ""
    print(f"Symorva dev environment running{mode}")
    print(f"  homeserver: {s['homeserver']['url']}  (server name {s['homeserver']['serverName']})")
    print(f"  services:   {s['services']['url']}")
    if "janus" in s:
        print(f"  janus:      {s['janus']['url']}")
    print(f"  admin:      {s['admin']['userId']}")
    print(f"  settings:   rate limit {s['rateLimit']} (services {s.get('servicesRateLimit', '?')}), "
          f"access token lifetime {s['accessTokenLifetime']}")
    print(f"  env file:   {env_path}")
    print(f"  manifest:   {s['manifest']}")
    print("  logs:       Scripts/dev-server logs [-f]")
    return 0


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped) still "exists"; treat it as dead.
    try:
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                return False
    except OSError:
        pass
    return True


def wait(args: list[str]) -> int:
    timeout = 90.0
    if "--timeout" in args:
        i = args.index("--timeout")
        timeout = float(args[i + 1])
        del args[i : i + 2]
    pending = [(args[i], args[i + 1], int(args[i + 2])) for i in range(0, len(args), 3)]
    # Never go through an http(s)_proxy from the environment for loopback checks.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    start = time.monotonic()
    deadline = start + timeout
    while pending:
        still = []
        for name, url, pid in pending:
            try:
                with opener.open(url, timeout=2) as r:
                    if r.status == 200:
                        print(f"{name} answered after {time.monotonic() - start:.1f}s", file=sys.stderr)
                        continue
            except (urllib.error.URLError, OSError, ValueError):
                pass
            if not pid_alive(pid):
                print(f"FAILED: {name} (pid {pid}) exited before answering {url}", file=sys.stderr)
                print(name)
                return 1
            still.append((name, url, pid))
        pending = still
        if pending:
            if time.monotonic() > deadline:
                for name, url, _ in pending:
                    print(f"FAILED: {name} did not answer {url} within {timeout:.0f}s", file=sys.stderr)
                print(pending[0][0])
                return 1
            time.sleep(0.1)
    return 0


def _fmt(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return "" if value is None else str(value)


def json_get(path: str, keys: list[str]) -> int:
    """One line per key; a missing key prints an empty line ("?" when several keys)."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        data = {}
    for key in keys:
        value = data
        for part in key.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        text = _fmt(value)
        print(text if text or len(keys) == 1 else "?")
    return 0


def atomic_write(path: str, text: str, mode: int = 0o600) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


_SAFE = re.compile(r"^[A-Za-z0-9_./:@%+,=-]*$")


def shell_value(v: str) -> str:
    if _SAFE.match(v):
        return v
    return "'" + v.replace("'", "'\\''") + "'"


ENV_KEYS = [
    "SYMORVA_HOMESERVER_URL",
    "SYMORVA_SERVICES_URL",
    "SYMORVA_SERVER_NAME",
    "SYMORVA_ADMIN_USER",
    "SYMORVA_ADMIN_PASSWORD",
    "SYMORVA_ADMIN_LOCALPART",
    "SYMORVA_REGISTRATION_SHARED_SECRET",
    "SYMORVA_MANIFEST",
    "SYMORVA_STATE_DIR",
    "SYMORVA_TEST_MODE",
    "SYMORVA_RATE_LIMIT",
    "SYMORVA_SERVICES_RATE_LIMIT",
    "SYMORVA_ACCESS_TOKEN_LIFETIME",
    "SYMORVA_JANUS_URL",
    "SYMORVA_INTEROP_PYTHON",
    "SYMORVA_NIO_OLM_PYTHON",
]


def write_state(state_path: str, env_path: str, pairs: list[str]) -> int:
    v = dict(p.split("=", 1) for p in pairs)
    state = {
        "version": 1,
        "running": True,
        "startedAt": v["STARTED_AT"],
        "stateDir": v["SYMORVA_STATE_DIR"],
        "envFile": env_path,
        "manifest": v["SYMORVA_MANIFEST"],
        "testMode": v["SYMORVA_TEST_MODE"] == "1",
        "rateLimit": v["SYMORVA_RATE_LIMIT"],
        "servicesRateLimit": v["SYMORVA_SERVICES_RATE_LIMIT"],
        "accessTokenLifetime": v["SYMORVA_ACCESS_TOKEN_LIFETIME"],
        "homeserver": {
            "url": v["SYMORVA_HOMESERVER_URL"],
            "serverName": v["SYMORVA_SERVER_NAME"],
            "port": int(v["SYNAPSE_PORT"]),
            "pid": int(v["SYNAPSE_PID"]),
            "config": v["SYNAPSE_CONFIG"],
            "log": v["SYNAPSE_LOG"],
            "registrationSharedSecret": v["SYMORVA_REGISTRATION_SHARED_SECRET"],
        },
        "services": {
            "url": v["SYMORVA_SERVICES_URL"],
            "port": int(v["SERVICES_PORT"]),
            "pid": int(v["SERVICES_PID"]),
            "db": v["SERVICES_DB"],
            "log": v["SERVICES_LOG"],
        },
        "janus": {
            "url": v["SYMORVA_JANUS_URL"],
            "port": int(v["JANUS_PORT"]),
            "pid": int(v["JANUS_PID"]),
            "config": v["JANUS_CONFIG"],
            "log": v["JANUS_LOG"],
        },
        "admin": {
            "userId": v["SYMORVA_ADMIN_USER"],
            "localpart": v["SYMORVA_ADMIN_LOCALPART"],
            "password": v["SYMORVA_ADMIN_PASSWORD"],
        },
    }
    atomic_write(state_path, json.dumps(state, indent=2, sort_keys=True) + "\n")
    lines = [
        "# Symorva dev environment, written by Scripts/dev-server start. KEY=VALUE lines;",
        "# the last line exports them when sourced: source \"$(Scripts/dev-server envfile)\"",
    ]
    lines += [f"{k}={shell_value(v[k])}" for k in ENV_KEYS]
    lines.append("export " + " ".join(ENV_KEYS))
    atomic_write(env_path, "\n".join(lines) + "\n")
    return 0


def set_janus_pid(state_path: str, pid: str) -> int:
    """After `dev-server restart-janus`: the new Janus pid in the state file."""
    with open(state_path, encoding="utf-8") as f:
        state = json.load(f)
    state["janus"]["pid"] = int(pid)
    atomic_write(state_path, json.dumps(state, indent=2, sort_keys=True) + "\n")
    return 0


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, args = argv[0], argv[1:]
    if cmd == "free-port":
        print(free_port(args[0] if args else None))
        return 0
    if cmd == "free-ports":
        print(*free_ports(args[0]))
        return 0
    if cmd == "summary":
        return summary(args[0], args[1])
    if cmd == "wait":
        return wait(args)
    if cmd == "json-get":
        return json_get(args[0], args[1:])
    if cmd == "write-state":
        return write_state(args[0], args[1], args[2:])
    if cmd == "set-janus-pid":
        return set_janus_pid(args[0], args[1])
    if cmd == "random-secret":
        print(secrets.token_urlsafe(24))
        return 0
    print(f"devenv_helper: unknown command {cmd}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
