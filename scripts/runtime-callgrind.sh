#!/bin/sh
# Instructions per event through one MachineHost, measured with callgrind (repeatable on a
# busy machine, unlike wall-clock rates). Each form runs twice, with N and 2N events; the
# difference divided by N cancels the setup and warm-up. Usage:
#   [FORMS='burst off 0,send on 10'] [EXTRA='--trace-sink each'] scripts/runtime-callgrind.sh [BINARY] [N]
# BINARY defaults to .build/release/symorva-bench (build it with `swift build -c release`).
set -eu
binary=${1:-.build/release/symorva-bench}
n=${2:-20000}
instructions() {
    out=$(mktemp)
    valgrind --tool=callgrind --callgrind-out-file="$out.cg" "$binary" runtime --repeat 1 "$@" ${EXTRA:-} >/dev/null 2>"$out"
    grep -o 'Collected : [0-9]*' "$out" | grep -o '[0-9]*$'
    rm -f "$out" "$out.cg"
}
# FORMS lists "form tracing observers" triples separated by commas.
forms=${FORMS:-"loop off 0,burst off 0,burst off 10,send off 0,send off 10,post off 0,burst on 0,send on 0"}
echo "$forms" | tr ',' '\n' | while read -r spec; do
    set -- $spec
    small=$(instructions --forms "$1" --tracing "$2" --observers "$3" --events "$n")
    large=$(instructions --forms "$1" --tracing "$2" --observers "$3" --events $((2 * n)))
    if [ "$1" = loop ]; then per=$(((large - small) / (20 * n))); else per=$(((large - small) / n)); fi
    printf '%-6s tracing %-3s observers %-2s  %6s instructions/event\n' "$1" "$2" "$3" "$per"
done
