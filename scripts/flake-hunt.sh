#!/usr/bin/env bash
# flake-hunt.sh: run Berth's tests repeatedly while a CPU hog loads the
# machine, and report every failure by package and test.
#
# A test that passes on an idle laptop can still fail on a loaded CI
# machine: a deadline too tight, an ordering nobody stated, a race the
# scheduler rarely shows. Starving the tests of CPU makes those show up in
# minutes instead of once a week. Run it before a risky change, and fix
# what it finds at its cause (never by retrying or skipping the test).
#
#   scripts/flake-hunt.sh                          # ./... -race -count=5, hog on every core
#   scripts/flake-hunt.sh -c 50 -p ./internal/workqueue -t TestQueueHolders
#   scripts/flake-hunt.sh -r 3 -c 2 -H 1 -p './leader ./conductor'
#   nice -n 15 scripts/flake-hunt.sh ...           # on a machine others share
#
# Options:
#   -p PKGS    packages, space separated (default ./...)
#   -c N       go test -count (default 5)
#   -r N       rounds: separate go test runs, each a fresh process so
#              TestMain's leak check runs every round (default 1)
#   -t REGEX   go test -run
#   -R         no -race (it is on by default)
#   -H N       CPU hog workers; 0 runs without a hog (default: the number
#              of cores). stress-ng --cpu N if installed, else N busy loops.
#   -T DUR     go test -timeout (default 30m)
#   -k DIR     keep the logs in DIR (default: a temp dir, kept on failure)
#   -- ARGS    anything after -- goes to go test as is (-v, -short, ...)
#
# Exit status: 0 when every round passed, 1 when any test failed, 2 on a
# usage error.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

pkgs="./..."
count=5
rounds=1
run=""
race=1
hog=$(nproc 2>/dev/null || echo 2)
timeout=30m
logdir=""
extra=()

usage() { sed -n '2,/^set -uo/p' "$0" | sed -e '/^set -uo/d' -e 's/^# \{0,1\}//' >&2; exit 2; }

while getopts ":p:c:r:t:RH:T:k:h" opt; do
    case $opt in
    p) pkgs=$OPTARG ;;
    c) count=$OPTARG ;;
    r) rounds=$OPTARG ;;
    t) run=$OPTARG ;;
    R) race=0 ;;
    H) hog=$OPTARG ;;
    T) timeout=$OPTARG ;;
    k) logdir=$OPTARG ;;
    h) usage ;;
    :) echo "flake-hunt: -$OPTARG needs a value" >&2; exit 2 ;;
    *) echo "flake-hunt: unknown option -$OPTARG" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[ "${1:-}" = "--" ] && shift
extra=("$@")
for n in "$count" "$rounds" "$hog"; do
    case $n in '' | *[!0-9]*) echo "flake-hunt: '$n' is not a number" >&2; exit 2 ;; esac
done

keep_logs=0
if [ -n "$logdir" ]; then
    mkdir -p "$logdir" || exit 2
    keep_logs=1
else
    logdir=$(mktemp -d "${TMPDIR:-/tmp}/flake-hunt.XXXXXX") || exit 2
fi

# The hog: its pids, killed one by one on any exit (Ctrl-C included), so a
# hunt never leaves the machine loaded behind it; a go test still running
# is stopped the same way.
hog_pids=()
gotest=""
# shellcheck disable=SC2317 # called by on_exit too
stop_hog() {
    local pid
    for pid in "${hog_pids[@]}"; do
        kill "$pid" 2>/dev/null
    done
    for pid in "${hog_pids[@]}"; do
        wait "$pid" 2>/dev/null
    done
    hog_pids=()
}
# shellcheck disable=SC2317 # called by the EXIT trap
on_exit() {
    if [ -n "$gotest" ]; then
        kill -- "-$gotest" 2>/dev/null
        wait "$gotest" 2>/dev/null
    fi
    stop_hog
    if [ "$keep_logs" = 0 ]; then rm -rf "$logdir"; fi
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

start_hog() {
    [ "$hog" -gt 0 ] || return 0
    if command -v stress-ng >/dev/null 2>&1; then
        stress-ng --cpu "$hog" --quiet &
        hog_pids+=($!)
        echo "== hog: stress-ng --cpu $hog (pid $!)"
    else
        local i
        for ((i = 0; i < hog; i++)); do
            ( while :; do :; done ) &
            hog_pids+=($!)
        done
        echo "== hog: $hog busy loops (pids ${hog_pids[*]}; stress-ng not installed)"
    fi
}

args=(test -count="$count" -timeout="$timeout")
[ "$race" = 1 ] && args+=(-race)
[ -n "$run" ] && args+=(-run "$run")
args+=("${extra[@]}")
# shellcheck disable=SC2206 # packages are split on spaces on purpose
args+=($pkgs)

# failures LOG ROUND: one line "round<TAB>package<TAB>test<TAB>first line
# of its output" per failed test. go test prints a package's output whole,
# ending with its "FAIL<TAB>pkg" or "ok<TAB>pkg" line, so the tests that
# failed since the last such line are that package's. A package that failed
# with no test failing (a leak found by TestMain, a panic, a build error,
# a timeout) is reported with its own first telling line.
failures() {
    awk -v round="$2" '
    function flush(pkg, line,   i) {
        if (nfail == 0) { fail[++nfail] = "(package)"; why[nfail] = (pkgmsg != "" ? pkgmsg : line) }
        for (i = 1; i <= nfail; i++) printf "%s\t%s\t%s\t%s\n", round, pkg, fail[i], why[i]
        nfail = 0; pkgmsg = ""; cur = 0; top = 0
    }
    /^(=== RUN|=== PAUSE|=== CONT|--- PASS|--- SKIP)/ { cur = 0; next }
    /^ *--- FAIL: / {
        name = $0; sub(/^ *--- FAIL: /, "", name); sub(/ \(.*$/, "", name)
        # A failed subtest is printed under its failed parent: the subtest
        # is the one worth naming, so it takes its parent'"'"'s entry.
        if ($0 ~ /^ / && top > 0 && fail[top] == parent) { fail[top] = name; cur = top; next }
        fail[++nfail] = name; why[nfail] = ""; cur = nfail
        if ($0 !~ /^ /) { top = nfail; parent = name }
        next
    }
    cur > 0 && why[cur] == "" && /^ +[^ ]/ { why[cur] = $0; sub(/^ +/, "", why[cur]); next }
    /^(panic:|fatal error:|WARNING: DATA RACE|leakcheck|.*goroutines? leaked|.*leaked goroutine)/ {
        if (pkgmsg == "") pkgmsg = $0
        next
    }
    /^FAIL\t/ { split($0, f, "\t"); sub(/ \[.*$/, "", f[2]); flush(f[2], $0); next }
    /^ok  \t/ { nfail = 0; pkgmsg = ""; cur = 0; top = 0; next }
    ' "$1"
}

summary="$logdir/failures.tsv"
: >"$summary"
echo "== go ${args[*]}"
echo "== $rounds round(s), logs in $logdir"
start_hog
started=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
    log="$logdir/round-$r.log"
    echo "== round $r/$rounds ($(date -u +%H:%M:%S) UTC)"
    # In the background and waited for, so a signal to this script is
    # handled at once (bash runs traps only between foreground commands);
    # in a process group of its own, because go test killed alone leaves
    # its test binary running.
    setsid go "${args[@]}" >"$log" 2>&1 &
    gotest=$!
    wait "$gotest"
    status=$?
    gotest=
    grep -E '^(ok  |FAIL|---)' "$log" | grep -v -- '--- PASS' | sed 's/^/   /'
    failures "$log" "$r" | tee -a "$summary" | while IFS=$'\t' read -r rr pkg test why; do
        echo "!! FAIL round $rr: $pkg $test: $why"
    done
    if [ "$status" != 0 ] && ! grep -q . <(failures "$log" "$r"); then
        # go test failed with no package FAIL line we could read (a build
        # error, go itself killed): still a failure, never a silent pass.
        printf '%s\t%s\t%s\t%s\n' "$r" "(go test)" "(exit $status)" "$(grep -m1 -vE '^(ok|\?) ' "$log")" | tee -a "$summary"
    fi
done
stop_hog

elapsed=$(($(date +%s) - started))
n=$(wc -l <"$summary")
echo
echo "== summary: $rounds round(s) of go ${args[*]}, hog $hog, ${elapsed}s"
if [ "$n" = 0 ]; then
    echo "== 0 failures"
    exit 0
fi
echo "== $n failure(s):"
cut -f2,3 "$summary" | sort | uniq -c | sort -rn | sed 's/^/   /'
keep_logs=1
echo "== full output kept in $logdir"
exit 1
