# Shared by the bench-issue scripts; source it, never run it. berth and out
# are the sourcing script's variables (its -b and -o).
# shellcheck disable=SC2154

# berth_binary sets berth to a binary built from this tree in a temporary
# folder (removed when the script exits) unless the caller named one with
# -b; and out, the JSON lines file, to an absolute path, resolved from
# CALLER_DIR, where the caller stood before the script's cd (a relative
# -o used to land in the repository's root).
#
#   berth_binary CALLER_DIR
berth_binary() {
    if [ -z "$berth" ]; then
        tmp=$(mktemp -d)
        trap 'rm -rf "$tmp"' EXIT
        berth=$tmp/berth
        echo "== building berth into $berth"
        go build -o "$berth" ./cmd/berth
    fi
    out=$(cd "$1" && realpath -m -- "$out")
}

# bench_shown runs `BERTH bench ARGS...` and prints only the lines of its
# table that match the extended regexp SHOWN; a run that prints none of
# them (it failed before its table) fails.
#
#   bench_shown BERTH SHOWN ARGS...
bench_shown() {
    local bin=$1 shown=$2
    shift 2
    echo "== $(date -u +%T) berth bench $*" >&2
    "$bin" bench "$@" 2>&1 | grep -E "$shown" || {
        echo "$(basename "$0" .sh): berth bench $* failed" >&2
        return 1
    }
}
