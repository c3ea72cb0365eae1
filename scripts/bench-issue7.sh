#!/usr/bin/env bash
# Issue 7's figures, each one several times and alternated, so that the
# machine's drift (a third within minutes on a shared VM) falls on every
# variant alike. Every run appends its JSON line to OUT; the summary at
# the end prints each figure's runs and median.
#
#   scripts/bench-issue7.sh [-b BERTH] [-o OUT] [-n RUNS] [WHAT...]
#
# WHAT is any of (default: boot procs claims):
#   boot     10,000 hosts, 10,000 servers: 1 and 3 schedulers in one process
#   procs    the same with each scheduler a process of its own in a CPU
#            cgroup of 0.25 CPU (-scheduler-procs -scheduler-cpu 0.25)
#   claims   claims alone through 3 schedulers' placement against etcd's
#            single-key CAS, in alternating rounds (-baseline)
#   scaling  1,000, 10,000 and 100,000 hosts, 3,000 servers, 1 scheduler,
#            with the baselines (the rows and plot of docs/benchmarks.md)
#
# BERTH is a berth binary (default: built from this tree into a temp dir).
# Run it on a quiet machine: anything else running moves the figures.
set -euo pipefail
caller_dir=$PWD
cd "$(dirname "$0")/.."

berth=""
out="bench-issue7.jsonl"
runs=3
while getopts "b:o:n:h" opt; do
    case $opt in
    b) berth=$OPTARG ;;
    o) out=$OPTARG ;;
    n) runs=$OPTARG ;;
    h | *)
        sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
        [ "$opt" = h ] && exit 0 || exit 2
        ;;
    esac
done
shift $((OPTIND - 1))
what=("$@")
[ ${#what[@]} -gt 0 ] || what=(boot procs claims)
case $runs in
'' | *[!0-9]* | 0) echo "bench-issue7: -n wants a positive count, got '$runs'" >&2; exit 2 ;;
esac
for w in "${what[@]}"; do
    case $w in
    boot | procs | claims | scaling) ;;
    *) echo "bench-issue7: unknown figure '$w' (want boot, procs, claims or scaling)" >&2; exit 2 ;;
    esac
done

# shellcheck disable=SC1091
. scripts/bench-lib.sh
berth_binary "$caller_dir"

common=(-clients 64 -register-workers 128 -json "$out")

# Only the lines of the table that matter are shown.
bench() { bench_shown "$berth" '^(throughput|claims|etcd CAS|claim baseline|scheduler procs|process|load average|outcome)' "$@"; }

for w in "${what[@]}"; do
    for ((i = 1; i <= runs; i++)); do
        case $w in
        boot)
            for s in 1 3; do
                bench boot -hosts 10000 -servers 10000 -schedulers "$s" "${common[@]}"
            done
            ;;
        procs)
            for s in 1 3; do
                bench boot -hosts 10000 -servers 10000 -schedulers "$s" -scheduler-procs -scheduler-cpu 0.25 "${common[@]}"
            done
            ;;
        claims)
            bench boot -hosts 10000 -servers 3000 -schedulers 3 -baseline "${common[@]}"
            ;;
        scaling)
            for h in 1000 10000 100000; do
                bench boot -hosts "$h" -servers 3000 -baseline "${common[@]}"
            done
            ;;
        esac
    done
done

if command -v python3 >/dev/null 2>&1; then
    python3 - "$out" <<'EOF'
import json, statistics, sys

rows = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("scenario") != "boot" or "servers_per_s" not in r:
        continue
    quota = r.get("scheduler_cpu_quota", 0)
    procs = "one process"
    if r.get("scheduler_procs"):
        procs = "procs, cpu %.2f each" % quota if quota else "procs, no quota"
    key = (r["hosts"], r["servers"], r["schedulers"], procs)
    rows.setdefault(key, []).append(r)
print("\nhosts  servers  scheds  where              servers/s (runs; median)          claims/CAS alone (runs; median)")
for key in sorted(rows):
    rs = rows[key]
    sps = [r["servers_per_s"] for r in rs]
    ratios = [r["claim_only_to_cas"] for r in rs if r.get("claim_only_to_cas")]
    fmt = lambda xs, f: ", ".join(f % x for x in xs) + ("; " + f % statistics.median(xs) if xs else "")
    print("%-6d %-8d %-7d %-18s %-33s %s" % (key + (fmt(sps, "%.0f"), fmt(ratios, "%.2f"))))
EOF
fi
