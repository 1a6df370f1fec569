# shellcheck shell=bash
# Shared helpers for the project's entry scripts (Scripts/test, Scripts/run). Source it after
# `set -euo pipefail`; it only defines variables and functions.
#
#   REPO_ROOT                  the checkout, absolute, whatever the caller's cwd
#   log_step / log_info / log_warn / die
#   ensure_system_packages     Debian packages the build and the dev servers need
#   require_command NAME HINT  fail clearly when a tool is missing
#   run_timed VAR CMD...       run CMD, store its duration in seconds in VAR, return its status
#   swift_quiet ARGS...        swift ARGS, its output without the one known build warning

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)"

# Colours only on a terminal, never in CI logs.
if [ -t 2 ] && [ -z "${NO_COLOR:-}" ]; then
  _C_BOLD=$'\033[1m' _C_RED=$'\033[31m' _C_YELLOW=$'\033[33m' _C_RESET=$'\033[0m'
else
  _C_BOLD='' _C_RED='' _C_YELLOW='' _C_RESET=''
fi

log_step() { printf '%s==> %s%s\n' "$_C_BOLD" "$*" "$_C_RESET" >&2; }
log_info() { printf '    %s\n' "$*" >&2; }
log_warn() { printf '%swarning:%s %s\n' "$_C_YELLOW" "$_C_RESET" "$*" >&2; }
die() {
  printf '%serror:%s %s\n' "$_C_RED" "$_C_RESET" "$*" >&2
  exit 1
}

# swift_quiet ARGS...: `swift ARGS` with its output (stdout and stderr, both to stdout) filtered of
# the one known build warning (SwiftPM's "prohibited flag(s): -pthread" for GStreamer's pkg-config
# flags, explained in docs/adapters.md), said once instead; the exit status is swift's.
swift_quiet() (
  set +e
  swift "$@" 2>&1 | "$REPO_ROOT/Scripts/lib/known-warnings"
  exit "${PIPESTATUS[0]}"
)

require_command() {
  command -v "$1" >/dev/null 2>&1 || die "'$1' not found: $2"
}

# The C libraries SwiftPM links through module maps, pkg-config for their flags, and (when
# the system Python lacks ensurepip) python3-venv for the dev servers' virtual environments.
SYMORVA_SYSTEM_PACKAGES=(libcurl4-openssl-dev libsqlite3-dev libolm-dev libsodium-dev libssl-dev pkg-config)
# Meetings: the Janus media server and the GStreamer tools and plugins of the HLS packager
# (udpsrc, rtpjitterbuffer, rtpopusdepay, opusdec: base/good; voaacenc, hlssink2: bad).
SYMORVA_SYSTEM_PACKAGES+=(janus gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  gstreamer1.0-plugins-bad)
# The Linux media engine (SymorvaMediaGStreamer): GStreamer's headers and libraries for the
# CGStreamer module map (gstreamer-1.0, -app, -audio, -sdp, -webrtc through pkg-config),
# webrtcbin (plugins-bad) and its ICE agent (gstreamer1.0-nice), Opus and RTP (base/good).
SYMORVA_SYSTEM_PACKAGES+=(libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libgstreamer-plugins-bad1.0-dev
  gstreamer1.0-nice)
# The media-path cut test blocks Janus's UDP on loopback with tc (iproute2).
SYMORVA_SYSTEM_PACKAGES+=(iproute2)
# The language-neutral contract (docs/contract.md): tsc type-checks contract/symorva.d.ts, and
# the Node client's tests run under Node.js.
SYMORVA_SYSTEM_PACKAGES+=(nodejs node-typescript)
# `symorva-bench media-upload` compares its upload with the curl program's.
SYMORVA_SYSTEM_PACKAGES+=(curl)

# Installs whichever of the packages is missing. Fast when nothing is missing: one `dpkg -s`
# call and no apt-get at all. Uses apt-get directly as root, sudo otherwise, and says what to
# install by hand when neither is possible.
ensure_system_packages() {
  local wanted=("${SYMORVA_SYSTEM_PACKAGES[@]}") missing=() package
  if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    wanted+=(python3-venv)
  fi
  command -v dpkg >/dev/null 2>&1 || {
    log_warn "dpkg not found: not a Debian system; make sure these are installed: ${wanted[*]}"
    return 0
  }
  local info
  for package in "${wanted[@]}"; do
    # dpkg -s exits 0 for removed-but-configured packages too: check the status line. (Read
    # into a variable: `dpkg -s | grep -q` can fail under pipefail when grep exits early.)
    info="$(dpkg -s "$package" 2>/dev/null || true)"
    case "$info" in
      *"Status: install ok installed"*) ;;
      *) missing+=("$package") ;;
    esac
  done
  [ ${#missing[@]} -eq 0 ] && return 0

  log_step "Installing system packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      die "missing packages (${missing[*]}) and not root, no sudo: run as root: apt-get install -y ${missing[*]}"
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq || die "apt-get update failed"
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || die "apt-get install ${missing[*]} failed"
}

# run_timed VAR CMD...: runs CMD; sets VAR to the seconds it took; returns CMD's status.
run_timed() {
  local __var="$1" __start=$SECONDS __status=0
  shift
  "$@" || __status=$?
  printf -v "$__var" '%s' "$((SECONDS - __start))"
  return "$__status"
}

# source_env_file PATH: exports every KEY=VALUE of a dev-server env file into this shell.
source_env_file() {
  [ -f "$1" ] || die "env file '$1' not found"
  set -a
  # shellcheck disable=SC1090
  . "$1"
  set +a
}
