"""Writes the Janus media server's configuration for the dev environment (stdlib only).

    python3 configure_janus.py --out DIR --port N --admin-key-file FILE --rtp-ports MIN-MAX

DIR receives janus.jcfg, janus.transport.http.jcfg and janus.plugin.audiobridge.jcfg (mode
0600: the AudioBridge admin key is in the last one). Only the HTTP transport (plain HTTP on
127.0.0.1:N, no admin API) and the AudioBridge plugin are loaded; no event handlers, no
loggers. The admin key (created once per state dir, URL-safe random) is what the community
services need to create AudioBridge rooms and RTP forwarders; members never see it.
"""

from __future__ import annotations

import argparse
import os
import secrets
import sys

LIB = "/usr/lib/x86_64-linux-gnu/janus"


def lib_dir() -> str:
    for candidate in (LIB, "/usr/lib/aarch64-linux-gnu/janus", "/usr/lib/janus"):
        if os.path.isdir(os.path.join(candidate, "plugins")):
            return candidate
    return LIB


def plugin_files(folder: str, keep: str) -> list[str]:
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".so"))
    except OSError:
        return []
    return [n for n in names if n != keep]


def write(path: str, text: str) -> None:
    tmp = f"{path}.tmp{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def admin_key(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            key = f.read().strip()
        if key:
            return key
    except FileNotFoundError:
        pass
    key = secrets.token_urlsafe(24)
    write(path, key + "\n")
    return key


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--admin-key-file", required=True)
    # Below Linux's ephemeral ports (32768-60999), where the members' ICE agents and the HLS
    # packager bind, and aligned (0x4000/0xc000): the media-path cut test blocks exactly these.
    p.add_argument("--rtp-ports", default="16384-32767")
    p.add_argument("--debug-level", type=int, default=4)
    a = p.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    lib = lib_dir()
    key = admin_key(a.admin_key_file)
    disabled_plugins = ",".join(plugin_files(os.path.join(lib, "plugins"), "libjanus_audiobridge.so"))
    disabled_transports = ",".join(plugin_files(os.path.join(lib, "transports"), "libjanus_http.so"))
    disabled_loggers = ",".join(plugin_files(os.path.join(lib, "loggers"), ""))
    write(os.path.join(a.out, "janus.jcfg"), f"""general: {{
	configs_folder = "{a.out}"
	plugins_folder = "{lib}/plugins"
	transports_folder = "{lib}/transports"
	events_folder = "{lib}/events"
	loggers_folder = "{lib}/loggers"
	debug_level = {a.debug_level}
	server_name = "symorva-dev"
	session_timeout = 60
}}
certificates: {{
}}
media: {{
	rtp_port_range = "{a.rtp_ports}"
}}
nat: {{
	nice_debug = false
	ice_ignore_list = "vmnet"
}}
plugins: {{
	disable = "{disabled_plugins}"
}}
transports: {{
	disable = "{disabled_transports}"
}}
loggers: {{
	disable = "{disabled_loggers}"
}}
events: {{
	broadcast = false
}}
""")
    write(os.path.join(a.out, "janus.transport.http.jcfg"), f"""general: {{
	json = "plain"
	base_path = "/janus"
	http = true
	ip = "127.0.0.1"
	port = {a.port}
	https = false
}}
admin: {{
	admin_http = false
	admin_https = false
}}
cors: {{
}}
""")
    write(os.path.join(a.out, "janus.plugin.audiobridge.jcfg"), f"""general: {{
	admin_key = "{key}"
	lock_rtp_forward = true
	events = false
}}
""")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
