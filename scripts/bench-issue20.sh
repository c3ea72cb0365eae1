#!/usr/bin/env bash
# Issue 20's figures in one sitting, each with the command docs/benchmarks.md
# gives for it, so that they are all measured on one machine at one pace.
# `berth bench` results append their JSON lines to OUT; the lines that
# matter are printed as each run ends.
#
#   scripts/bench-issue20.sh [-b BERTH] [-o OUT] [-n RUNS] [-r REF_URL] [-p URL] [WHAT...]
#
# WHAT is any of (default: all but placement, which needs -r):
#   boot10k     10,000 hosts, 10,000 servers, 1 scheduler, everything in one
#               process (target >= 2,000 servers/s, <= 1 ms CPU per server)
#   agents100k  100,000 hosts with real agents' liveness and syncs in two
#               fleet processes, 3,000 servers (target >= 700/s)
#   alone100k   100,000 hosts, Berth alone (one shared lease, no syncs),
#               10,000 servers (target >= 1,000/s)
#   candidates  GET /allocation_candidates at limit=1000 over HTTP at 1k,
#               10k and 100k providers (target p50 <= 1 ms)
#   cold        a scheduler's cold start at 100,000 hosts x 1,000,000
#               instances (target <= 6 s, <= 1 GiB peak RSS); the data set
#               is generated once into $BERTH_BENCH_COLD_DATA (default
#               /tmp/berth-cold-data) and reused
#   drain       a drain of 100 hosts x 20 servers in a 10,000-host cloud
#   resize      resize churn, 100 at once, at 1,000 and 10,000 hosts
#   placement   `berth bench placement` at 1,000 and 10,000 providers against
#               URL (a running `berth dev`'s Placement, default
#               http://127.0.0.1:8778) and REF_URL (the real Placement:
#               ../shared/reference/start-placement.sh DIR 8779), one after
#               the other; then draw them: scripts/plot-placement.py
#
# RUNS repeats each `berth bench` figure (default 3; the go test figures run
# twice). BERTH is a berth binary (default: built from this tree).
# Run it on a quiet machine: anything else running moves the figures.
set -euo pipefail
caller_dir=$PWD
cd "$(dirname "$0")/.."

berth=""
out="bench-issue20.jsonl"
runs=3
ref=""
url="http://127.0.0.1:8778"
while getopts "b:o:n:r:p:h" opt; do
    case $opt in
    b) berth=$OPTARG ;;
    o) out=$OPTARG ;;
    n) runs=$OPTARG ;;
    r) ref=$OPTARG ;;
    p) url=$OPTARG ;;
    h | *)
        sed -n '2,31p' "$0" | sed 's/^# \{0,1\}//'
        [ "$opt" = h ] && exit 0 || exit 2
        ;;
    esac
done
shift $((OPTIND - 1))
what=("$@")
[ ${#what[@]} -gt 0 ] || what=(boot10k agents100k alone100k candidates cold drain resize)
case $runs in
'' | *[!0-9]* | 0) echo "bench-issue20: -n wants a positive count, got '$runs'" >&2; exit 2 ;;
esac
for w in "${what[@]}"; do
    case $w in
    boot10k | agents100k | alone100k | candidates | cold | drain | resize) ;;
    placement)
        [ -n "$ref" ] || { echo "bench-issue20: placement needs -r REF_URL, the real Placement to compare with" >&2; exit 2; }
        for u in "$url" "$ref"; do
            curl -fsS -o /dev/null "$u/" || { echo "bench-issue20: nothing answers at $u (start berth dev, or ../shared/reference/start-placement.sh DIR PORT)" >&2; exit 2; }
        done
        ;;
    *) echo "bench-issue20: unknown figure '$w' (want boot10k, agents100k, alone100k, candidates, cold, drain, resize or placement)" >&2; exit 2 ;;
    esac
done

# shellcheck disable=SC1091
. scripts/bench-lib.sh
berth_binary "$caller_dir"

common=(-clients 64 -register-workers 128 -json "$out")
shown='^(throughput|moves|one move|process  |fleet processes|outcome|load average|populate  |candidates limit|claim cycles|hot-provider race|race check)'

bench() { bench_shown "$berth" "$shown" "$@"; }

gotest() {
    echo "== $(date -u +%T) go test $*" >&2
    go test "$@" 2>&1 | grep -E '^(Benchmark|FAIL|ok|---)' || {
        echo "bench-issue20: go test $* failed" >&2
        return 1
    }
}

for w in "${what[@]}"; do
    case $w in
    candidates)
        gotest ./placement/httpapi -run '^$' -bench 'CandidatesHTTP(1k|10k|100k)$' -benchmem -count 2
        ;;
    cold)
        export BERTH_BENCH_COLD_DATA=${BERTH_BENCH_COLD_DATA:-/tmp/berth-cold-data}
        gotest ./scheduler -run '^$' -bench 'ColdStart100k/process' -benchtime 1x -count 2 -timeout 30m
        ;;
    placement)
        for p in 1000 10000; do
            for u in "$url" "$ref"; do
                bench placement -url "$u" -providers "$p" -keepalive=false -json "$out"
            done
        done
        ;;
    *)
        for ((i = 1; i <= runs; i++)); do
            case $w in
            boot10k) bench boot -hosts 10000 -servers 10000 -schedulers 1 -etcd-tally "${common[@]}" ;;
            agents100k) bench boot -hosts 100000 -servers 3000 -fleet-procs 2 "${common[@]}" ;;
            alone100k) bench boot -hosts 100000 -servers 10000 -liveness shared -syncs=false "${common[@]}" ;;
            drain) bench drain -hosts 10000 -drain-hosts 100 -servers-per-host 20 -servers 10000 -drain-parallel 4 -timeout 15m "${common[@]}" ;;
            resize)
                bench resize -hosts 1000 -servers 2000 -resize-parallel 100 -duration 20s "${common[@]}"
                bench resize -hosts 10000 -servers 10000 -resize-parallel 100 -duration 20s "${common[@]}"
                ;;
            esac
        done
        ;;
    esac
done
echo "== $(date -u +%T) done; JSON lines in $out" >&2
