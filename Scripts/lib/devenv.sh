# shellcheck shell=bash
# Shared helpers for the dev environment scripts (Scripts/dev-server, Scripts/server-test,
# Scripts/export-openapi). Source it; it sets no shell options of its own.
#
# Paths (all absolute, whatever the caller's cwd):
#   SYMORVA_REPO_ROOT   the checkout
#   SYMORVA_CACHE_DIR   venvs etc.: $SYMORVA_CACHE or <repo>/.cache
#   SYMORVA_STATE_DIR   runtime state of this checkout's dev env: <repo>/.dev-state
#
# Knobs (environment):
#   SYMORVA_PYTHON                interpreter to build the venvs with (default python3)
#   SYMORVA_START_TIMEOUT         seconds to wait for the servers (default 120)

SYMORVA_REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"
SYMORVA_CACHE_DIR="${SYMORVA_CACHE:-$SYMORVA_REPO_ROOT/.cache}"
SYMORVA_STATE_DIR="${SYMORVA_STATE_DIR:-$SYMORVA_REPO_ROOT/.dev-state}"
SYMORVA_HELPER="$SYMORVA_REPO_ROOT/Scripts/lib/devenv_helper.py"
SYMORVA_SERVER_DIR="$SYMORVA_REPO_ROOT/Server"
SYMORVA_SYNAPSE_REQS="$SYMORVA_SERVER_DIR/homeserver/requirements.txt"
SYMORVA_SERVER_REQS="$SYMORVA_SERVER_DIR/requirements.txt"
SYMORVA_INTEROP_REQS="$SYMORVA_REPO_ROOT/Tests/InteropPeer/requirements.txt"
SYMORVA_NIO_OLM_REQS="$SYMORVA_REPO_ROOT/Tests/InteropPeer/requirements-nio-olm.txt"

devenv_log() { printf '%s: %s\n' "${DEVENV_PROG:-dev-server}" "$*" >&2; }
devenv_die() { devenv_log "error: $*"; exit 1; }

# The interpreter used to create venvs and run the helper.
# Call devenv_require_python once at the top of a script (not in $(...)), so the
# check runs once; devenv_python then just prints the interpreter.
DEVENV_PY=""
devenv_require_python() {
  if [ -z "$DEVENV_PY" ]; then
    local py="${SYMORVA_PYTHON:-python3}" out
    command -v "$py" >/dev/null 2>&1 || devenv_die "$py not found (set SYMORVA_PYTHON to a Python >= 3.10)"
    out="$("$py" -c 'import sys; print(sys.executable if sys.version_info >= (3, 10) else "")')" || true
    [ -n "$out" ] || devenv_die "$py is $("$py" -V 2>&1); Python >= 3.10 is required (set SYMORVA_PYTHON)"
    DEVENV_PY="$out"
  fi
}
devenv_python() {
  devenv_require_python
  printf '%s\n' "$DEVENV_PY"
}

devenv_helper() { "$(devenv_python)" "$SYMORVA_HELPER" "$@"; }

# Run "$@" in a subshell holding an exclusive lock on file $1 (flock where available;
# else a mkdir lock). The lock is released when the subshell ends, also on exit/die.
devenv_with_lock() {
  local lockfile="$1"; shift
  mkdir -p "$(dirname "$lockfile")"
  if command -v flock >/dev/null 2>&1; then
    (
      exec 9>"$lockfile"
      flock 9
      "$@" 9>&-
    )
  else
    local dir="$lockfile.d" waited=0
    until mkdir "$dir" 2>/dev/null; do
      sleep 1; waited=$((waited + 1))
      [ "$waited" -lt 900 ] || devenv_die "timed out waiting for lock $dir (remove it if stale)"
    done
    local rc=0
    ( "$@" ) || rc=$?
    rmdir "$dir"
    return "$rc"
  fi
}

# devenv_venv_path NAME REQFILE: where the venv for these requirements lives. The
# directory name carries a hash of the requirements and the Python version, so a
# changed pin gets a fresh venv and an unchanged one is reused.
devenv_venv_path() {
  local name="$1" reqs="$2" py hash
  py="$(devenv_python)"
  hash="$("$py" -c 'import hashlib, sys
h = hashlib.sha256(open(sys.argv[1], "rb").read())
h.update(sys.version.encode())
print(h.hexdigest()[:12])' "$reqs")"
  printf '%s/venvs/%s-%s\n' "$SYMORVA_CACHE_DIR" "$name" "$hash"
}

_devenv_build_venv() {
  local venv="$1" reqs="$2" logfile="$3" py
  [ -f "$venv/.symorva-ready" ] && return 0
  py="$(devenv_python)"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  {
    echo "== $(date) creating $venv"
    if ! "$py" -m venv "$venv"; then
      # Debian's system python may lack ensurepip (python3-venv): fall back to virtualenv.
      echo "== python -m venv failed; trying virtualenv"
      rm -rf "$venv"
      "$py" -m pip install --disable-pip-version-check -q --user virtualenv \
        || "$py" -m pip install --disable-pip-version-check -q --user --break-system-packages virtualenv
      "$py" -m virtualenv -q "$venv"
    fi
    "$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$reqs"
  } >"$logfile" 2>&1 || {
    devenv_log "error: installing $(basename "$venv") failed; last lines of $logfile:"
    tail -n 30 "$logfile" >&2
    return 1
  }
  date >"$venv/.symorva-ready"
}

# devenv_ensure_venv NAME REQFILE: create the venv (if missing) and print its path.
devenv_ensure_venv() {
  local name="$1" reqs="$2" venv
  venv="$(devenv_venv_path "$name" "$reqs")"
  if [ ! -f "$venv/.symorva-ready" ]; then
    devenv_log "installing $name environment into $venv (first run; takes a while)"
    devenv_with_lock "$SYMORVA_CACHE_DIR/venvs/.lock-$name" \
      _devenv_build_venv "$venv" "$reqs" "$SYMORVA_CACHE_DIR/venvs/install-$name.log" || return 1
  fi
  printf '%s\n' "$venv"
}

# The four venvs (the server's in parallel with the others when missing). Sets SYNAPSE_VENV,
# SERVER_VENV, INTEROP_VENV (matrix-nio for the interoperability tests' peer) and NIO_OLM_VENV
# (matrix-nio 0.25.2 on python-olm, for the verification interoperability tests).
# shellcheck disable=SC2034  # used by the callers
devenv_ensure_all_venvs() {
  local bg_pid="" rc=0
  SERVER_VENV="$(devenv_venv_path server "$SYMORVA_SERVER_REQS")"
  SYNAPSE_VENV="$(devenv_venv_path synapse "$SYMORVA_SYNAPSE_REQS")"
  INTEROP_VENV="$(devenv_venv_path interop "$SYMORVA_INTEROP_REQS")"
  NIO_OLM_VENV="$(devenv_venv_path nio-olm "$SYMORVA_NIO_OLM_REQS")"
  if [ ! -f "$SERVER_VENV/.symorva-ready" ]; then
    devenv_ensure_venv server "$SYMORVA_SERVER_REQS" >/dev/null &
    bg_pid=$!
  fi
  devenv_ensure_venv synapse "$SYMORVA_SYNAPSE_REQS" >/dev/null || rc=1
  devenv_ensure_venv interop "$SYMORVA_INTEROP_REQS" >/dev/null || rc=1
  devenv_ensure_venv nio-olm "$SYMORVA_NIO_OLM_REQS" >/dev/null || rc=1
  if [ -n "$bg_pid" ]; then wait "$bg_pid" || rc=1; fi
  return "$rc"
}

# --- processes -------------------------------------------------------------------

# devenv_pid_ours PIDFILE MARKER: true when the pid in PIDFILE is alive, leads its own
# process group and its command line contains MARKER (a path inside this state dir),
# so a recycled pid is never mistaken for ours.
devenv_pid_ours() {
  local pidfile="$1" marker="$2" pid pgid cmd
  [ -f "$pidfile" ] || return 1
  pid="$(cat "$pidfile" 2>/dev/null)" || return 1
  [[ "$pid" =~ ^[0-9]+$ ]] || return 1
  kill -0 "$pid" 2>/dev/null || return 1
  pgid="$(ps -o pgid= -p "$pid" 2>/dev/null | tr -d ' ')" || return 1
  [ "$pgid" = "$pid" ] || return 1
  cmd="$(ps -o args= -p "$pid" 2>/dev/null)" || return 1
  case "$cmd" in *"$marker"*) return 0 ;; *) return 1 ;; esac
}

# devenv_spawn PIDFILE LOGFILE CMD...: start CMD in the background as the leader of a
# new session/process group (so stop can signal the whole group), stdin from
# /dev/null, stdout+stderr appended to LOGFILE; writes its pid to PIDFILE.
devenv_spawn() {
  local pidfile="$1" logfile="$2"; shift 2
  local py
  py="$(devenv_python)"
  "$py" -c 'import os, sys
try:
    os.setsid()
except OSError:  # already a process group leader (job control on)
    pass
os.closerange(3, 4096)  # hold no pipes or locks of whoever ran dev-server
os.execv(sys.argv[1], sys.argv[1:])' "$@" </dev/null >>"$logfile" 2>&1 9>&- &
  printf '%s\n' "$!" >"$pidfile"
}

# devenv_group_alive PGID: true while a live (non-zombie) process is in the group.
# (kill -0 also succeeds for zombies, which linger until the reaper collects them.)
devenv_group_alive() {
  ps -A -o pgid= -o stat= 2>/dev/null | awk -v g="$1" '$1 == g && $2 !~ /^Z/ { found = 1 } END { exit !found }'
}

# devenv_kill_groups NAME PIDFILE MARKER [NAME PIDFILE MARKER...]: TERM each process group that is ours, wait
# for all of them together, KILL what is left after 15 s.
devenv_kill_groups() {
  local name pidfile marker pid i pids=() names=() left
  while [ $# -ge 3 ]; do
    name="$1" pidfile="$2" marker="$3"
    shift 3
    if devenv_pid_ours "$pidfile" "$marker"; then
      pid="$(cat "$pidfile")"
      kill -TERM -- "-$pid" 2>/dev/null || true
      pids+=("$pid"); names+=("$name")
    fi
    rm -f "$pidfile"
  done
  [ ${#pids[@]} -gt 0 ] || return 0
  for ((i = 0; i < 150; i++)); do
    left=0
    for pid in "${pids[@]}"; do devenv_group_alive "$pid" && left=1; done
    [ "$left" = 1 ] || break
    sleep 0.1
  done
  for i in "${!pids[@]}"; do
    pid="${pids[$i]}"
    if devenv_group_alive "$pid"; then
      devenv_log "${names[$i]} (pgid $pid) did not stop after 15s; killing"
      kill -KILL -- "-$pid" 2>/dev/null || true
    fi
    devenv_log "stopped ${names[$i]} (pid $pid)"
  done
}
