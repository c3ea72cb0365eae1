#!/usr/bin/python3
"""Plot `berth bench placement` JSON lines: Berth beside another Placement.

    scripts/plot-placement.py --name URL=LABEL [--name URL=LABEL ...] \
        docs/bench-placement.jsonl docs/bench-placement.png

Reads every result of the file, keeps the last per (endpoint, providers),
and draws three panels with one bar per endpoint at each provider count:
candidates p50 at each limit, claim cycles per second, and populate
requests per second. Latency is on a log scale because the endpoints
differ by orders of magnitude; each bar is labelled with its value, and
each panel's title names the ratio of the first endpoint to the second at
each provider count. Needs Debian's python3-matplotlib (hence
/usr/bin/python3).
"""
import argparse
import sys

from jsonlines import records

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    """The last result per (url, providers), in file order of first sight."""
    kept = {}
    for n, r in records(path):
        for field in ("url", "providers", "candidates", "claim_cycles", "claim_ns",
                      "populate_requests", "populate_ns"):
            if field not in r:
                sys.exit(f"{path}:{n}: no {field!r}: not a `berth bench placement -json` line")
        kept[(r["url"], r["providers"])] = r
    return kept


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("jsonl")
    ap.add_argument("png")
    ap.add_argument("--name", action="append", default=[], metavar="URL=LABEL",
                    help="the endpoints to draw, in order, and their labels (at least two)")
    args = ap.parse_args()
    names = []
    for spec in args.name:
        url, sep, label = spec.partition("=")
        if not sep or not url or not label:
            sys.exit(f"--name {spec!r}: want URL=LABEL")
        names.append((url, label))
    if len(names) < 2:
        sys.exit("want at least two --name URL=LABEL: the endpoints to set side by side")

    results = load(args.jsonl)
    counts = sorted({p for (u, p) in results if u in dict(names)})
    if not counts:
        sys.exit(f"{args.jsonl}: no result for any of {', '.join(u for u, _ in names)}")
    for url, _ in names:
        missing = [p for p in counts if (url, p) not in results]
        if missing:
            sys.exit(f"{args.jsonl}: no result for {url} at {missing} providers")
    limits = [c["limit"] for c in results[(names[0][0], counts[0])]["candidates"]]

    def p50_ms(r, limit):
        for c in r["candidates"]:
            if c["limit"] == limit:
                return c["latency"]["p50_ns"] / 1e6
        sys.exit(f"{r['url']} at {r['providers']} providers: no candidates at limit {limit}")

    def claims(r):
        return r["claim_cycles"] / (r["claim_ns"] / 1e9)

    def populate(r):
        return r["populate_requests"] / (r["populate_ns"] / 1e9)

    # One group of bars per (provider count, limit) in the latency panel,
    # per provider count in the other two.
    fig, axes = plt.subplots(1, 3, figsize=(15, 5), gridspec_kw={"width_ratios": [2, 1, 1]})
    width = 0.8 / len(names)
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]

    def bars(ax, groups, value, fmt):
        for i, (url, label) in enumerate(names):
            xs = [g + (i - (len(names) - 1) / 2) * width for g in range(len(groups))]
            ys = [value(results[(url, key[0])], *key[1:]) for key in groups]
            b = ax.bar(xs, ys, width, label=label, color=colors[i % len(colors)])
            ax.bar_label(b, labels=[fmt(y) for y in ys], fontsize=7, padding=2)

    def ratios(groups, value, smaller_is_better):
        out = []
        for key in groups:
            a = value(results[(names[0][0], key[0])], *key[1:])
            b = value(results[(names[1][0], key[0])], *key[1:])
            out.append(round(b / a) if smaller_is_better else round(a / b))
        return out

    groups = [(p, limit) for p in counts for limit in limits]
    ax = axes[0]
    bars(ax, groups, p50_ms, lambda y: f"{y:.2f}" if y < 10 else f"{y:.0f}")
    ax.set_yscale("log")
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{p:,} prov.\nlimit {limit}" for p, limit in groups], fontsize=8)
    ax.set_ylabel("ms (log scale)")
    r = ratios(groups, p50_ms, smaller_is_better=True)
    ax.set_title("GET /allocation_candidates p50, lower is better\n" +
                 ", ".join(f"{x:,}×" for x in r), fontsize=10)
    ax.legend(fontsize=8)

    groups = [(p,) for p in counts]
    for ax, value, title in ((axes[1], claims, "claim cycles/s, 8 clients"),
                             (axes[2], populate, "populate requests/s")):
        bars(ax, groups, value, lambda y: f"{y:,.0f}")
        ax.set_yscale("log")
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([f"{p:,} providers" for (p,) in groups], fontsize=8)
        r = ratios(groups, value, smaller_is_better=False)
        ax.set_title(f"{title}, higher is better\n" + ", ".join(f"{x:,}×" for x in r), fontsize=10)

    fig.suptitle(f"{names[0][1]} and {names[1][1]}, same client, same machine, one sitting", fontsize=11)
    fig.tight_layout()
    fig.savefig(args.png, dpi=110)


if __name__ == "__main__":
    main()
