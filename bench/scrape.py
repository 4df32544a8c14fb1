#!/usr/bin/env python3
"""Scrape a Sluice server's /metrics every INTERVAL seconds until killed,
keeping the lines of the given metric names, as JSON lines
{"t": unix seconds, "lines": [...]} (issue 11 benchmarks).

    bench/scrape.py http://127.0.0.1:18720 10 OUT.jsonl sluice_worker_loads_total sluice_evictions_total ...
"""
import json, sys, time, urllib.request

url, every, out, names = sys.argv[1], float(sys.argv[2]), sys.argv[3], tuple(sys.argv[4:])
with open(out, "a") as f:
    nxt = time.time()
    while True:
        try:
            body = urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=5).read().decode()
            lines = [l for l in body.splitlines() if l.startswith(names)]
            f.write(json.dumps({"t": time.time(), "lines": lines}) + "\n")
            f.flush()
        except Exception as e:
            f.write(json.dumps({"t": time.time(), "err": str(e)}) + "\n")
            f.flush()
        nxt += every
        time.sleep(max(0, nxt - time.time()))
