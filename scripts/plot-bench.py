#!/usr/bin/python3
"""Plot `berth bench` JSON lines: throughput and latency against host count.

    scripts/plot-bench.py docs/bench-results.jsonl docs/bench-scaling.png

Reads every `boot` result with one scheduler (or --schedulers N), keeps the
last per host count, and draws two panels: servers/s to ACTIVE and claims/s
(with the etcd CAS baseline when measured), and p50/p99 of the schedule and
total stages. Needs Debian's python3-matplotlib (hence /usr/bin/python3).
"""
import argparse
import sys

from jsonlines import records

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jsonl")
    ap.add_argument("png")
    ap.add_argument("--scenario", default="boot")
    ap.add_argument("--schedulers", type=int, default=1)
    ap.add_argument("--command-lacks", default="-config",
                    help="skip results whose command contains this (default: tuned runs with -config)")
    ap.add_argument("--until", default="",
                    help="only results started before this UTC time (RFC 3339 prefix, e.g. 2026-11-22T01:30)")
    ap.add_argument("--liveness", default="",
                    help="only results whose hosts kept this liveness (per-host or shared; older lines without the field are shared)")
    a = ap.parse_args()

    by_hosts = {}
    for _, r in records(a.jsonl):
        if r.get("scenario") == a.scenario and r.get("schedulers") == a.schedulers and r.get("stages") and not r.get("error") \
                and not (a.command_lacks and a.command_lacks in r.get("command", "")) \
                and not (a.until and r.get("at", "") >= a.until) \
                and not (a.liveness and r.get("liveness", "shared") != a.liveness):
            by_hosts[r["hosts"]] = r  # the last run per host count wins
    if not by_hosts:
        sys.exit(f"{a.jsonl}: no {a.scenario} result with {a.schedulers} scheduler(s)")
    hosts = sorted(by_hosts)
    rs = [by_hosts[h] for h in hosts]

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.8))
    ax1.plot(hosts, [r.get("servers_per_s", 0) for r in rs], "o-", label="servers/s to ACTIVE")
    ax1.plot(hosts, [r.get("claims_per_s", 0) for r in rs], "s--", label="claims/s")
    if any(r.get("claim_only_per_s") for r in rs):
        ax1.plot(hosts, [r.get("claim_only_per_s", 0) for r in rs], "d--", label="claims/s alone (baseline)")
    if any(r.get("cas_per_s") for r in rs):
        ax1.plot(hosts, [r.get("cas_per_s", 0) for r in rs], "^:", label="etcd single-key CAS txn/s (baseline)")
    ax1.set_xscale("log")
    ax1.set_yscale("log")
    ax1.set_xlabel("hosts")
    ax1.set_ylabel("per second")
    ax1.set_title(f"{a.scenario}: throughput ({a.schedulers} scheduler(s))")
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend(fontsize=8)

    for stage, style in (("schedule", "o-"), ("total", "s-"), ("handoff", "^-"), ("build", "v-")):
        for p, ls in (("p50_ms", ""), ("p99_ms", "--")):
            ys = [r["stages"].get(stage, {}).get(p, 0) for r in rs]
            if any(ys):
                ax2.plot(hosts, ys, style[0] + (ls or style[1:]), label=f"{stage} {p[:3]}")
    ax2.set_xscale("log")
    ax2.set_yscale("log")
    ax2.set_xlabel("hosts")
    ax2.set_ylabel("ms")
    ax2.set_title("stage latency")
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=7, ncol=2)

    loads = ", ".join(f"{h}: {r['loadavg'][0].split()[0]}" for h, r in zip(hosts, rs))
    fig.suptitle(f"berth bench on the shared 2-core machine (1-min load average at start: {loads})", fontsize=9)
    fig.tight_layout()
    fig.savefig(a.png, dpi=100)


if __name__ == "__main__":
    main()
