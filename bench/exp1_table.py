#!/usr/bin/env python3
"""Medians over runs of the exp1 sweep JSON files, next to M/D/1.

usage: exp1_table.py bench/results/exp1-run*.json
M/D/1 with mu = 500/s (2 ms deterministic service): mean wait in queue
Wq = rho / (2 mu (1 - rho)); mean time in system W = Wq + 1/mu.
"""
import json
import statistics
import sys

MU = 500.0
runs = [json.load(open(f)) for f in sys.argv[1:]]
by_rate = {}
for run in runs:
    for r in run:
        by_rate.setdefault(r["offeredRate"], []).append(r)
med = statistics.median
print("| offered/s | achieved/s | p50 ms | mean ms | p99 ms | M/D/1 Wq ms | M/D/1 W = Wq + 2 ms | mean - W ms |")
print("|---|---|---|---|---|---|---|---|")
for rate in sorted(by_rate):
    rs = by_rate[rate]
    rho = rate / MU
    if rho < 1:
        wq = rho / (2 * MU * (1 - rho)) * 1000
        w = wq + 1000 / MU
        pred = f"{wq:.2f} | {w:.2f}"
    else:
        wq = w = None
        pred = "∞ (ρ ≥ 1) | ∞"
    mean = med(r["latency"]["meanMs"] for r in rs)
    diff = f"{mean - w:+.2f}" if w is not None else "—"
    print(f"| {rate:.0f} | {med(r['achievedRate'] for r in rs):.1f} | "
          f"{med(r['latency']['p50Ms'] for r in rs):.2f} | {mean:.2f} | "
          f"{med(r['latency']['p99Ms'] for r in rs):.2f} | {pred} | {diff} |")
print()
print("per run p99 ms:", {int(k): [round(r["latency"]["p99Ms"], 1) for r in v] for k, v in sorted(by_rate.items())})
print("fell behind:", {int(k): sum(r["fellBehind"] for r in v) for k, v in sorted(by_rate.items())})
