#!/usr/bin/env python3
"""Summary of bench/overload JSON files (experiment 3): per run and medians.

usage: exp3_table.py CAP bench/results/exp3-run*.json
"""
import json
import statistics
import sys

cap = float(sys.argv[1])
runs = [json.load(open(f)) for f in sys.argv[2:]]
rows = []
for f, r in zip(sys.argv[2:], runs):
    o, n = r["phases"][0], r["phases"][1]
    codes = o["byCode"]
    exp = codes.get("expired_in_queue", 0)
    row = {
        "run": f,
        "sent/s": o["sentRate"],
        "goodput/s": o["goodput"],
        "goodput/cap": o["goodput"] / cap,
        "2xx": o["ok"],
        "2xx p50": o["okLatencyMs"].get("p50"),
        "2xx p99": o["okLatencyMs"].get("p99"),
        "rejected": sum(codes.values()),
        "rej p50": o["rejectedLatencyMs"].get("p50"),
        "rej p99": o["rejectedLatencyMs"].get("p99"),
        "refused p50": o.get("refusedLatencyMs", {}).get("p50"),
        "refused p99": o.get("refusedLatencyMs", {}).get("p99"),
        "codes": codes,
        "expired/2xx %": 100.0 * exp / max(o["ok"], 1),
        "lag p99": o["dispatchLagMs"].get("p99"),
        "after: first 2s p99": n["first2sOkLatencyMs"].get("p99"),
        "after: after 2s p99": n["after2sOkLatencyMs"].get("p99"),
        "after: codes": n["byCode"],
        "after: windows p99": [round(w["okLatencyMs"].get("p99", 0), 1) for w in n["windows"]],
    }
    rows.append(row)
    print(row)
med = statistics.median
print("medians:")
for k in rows[0]:
    if k in ("run", "codes", "after: codes", "after: windows p99"):
        continue
    vals = [r[k] for r in rows if r[k] is not None]
    print(f"  {k}: {med(vals):.3f}")
