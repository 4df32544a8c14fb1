#!/usr/bin/env python3
"""Summarise bench/many.sh (issue 11, lab experiment 3): OUT folder.

    bench/many_table.py /tmp/h-bench11/many [--skip 60] [--cold-ms 45]

Client side (all.jsonl, top10.jsonl): requests by outcome; a request is
counted cold when it was refused with cold_start or took >= --cold-ms (the
shortest load time is 50 ms, a warm 1 ms model answers in a few ms); the
hottest 10 models' p99 in the full run against the same models alone, from
--skip seconds on (steady state) and over the whole run. Server side
(metrics-*.jsonl, scraped every 10 s): cold starts, loads and evictions per
minute, and loads per model during the run.
"""
import json, math, re, sys, collections

out = sys.argv[1]
skip = 60.0
cold_ms = 45.0
args = sys.argv[2:]
for i, a in enumerate(args):
    if a == "--skip": skip = float(args[i + 1])
    if a == "--cold-ms": cold_ms = float(args[i + 1])

def p(xs, q):
    if not xs: return float("nan")
    s = sorted(xs)
    return s[max(int(math.ceil(q * len(s))) - 1, 0)]

def recs(tag):
    return [json.loads(l) for l in open(f"{out}/{tag}.jsonl")]

pat = re.compile(r'^(\w+)\{(.*)\} (\S+)$')
def scrapes(tag):
    rows = []
    for l in open(f"{out}/metrics-{tag}.jsonl"):
        d = json.loads(l)
        if "lines" not in d: continue
        m = {}
        for line in d["lines"]:
            g = pat.match(line)
            if not g: continue
            labels = dict(kv.split("=", 1) for kv in re.findall(r'(\w+="[^"]*")', g.group(2)))
            labels = {k: v.strip('"') for k, v in labels.items()}
            m[(g.group(1), tuple(sorted(labels.items())))] = float(g.group(3))
        rows.append((d["t"], m))
    return rows

def total(m, name, **want):
    return sum(v for (n, ls), v in m.items() if n == name and all(dict(ls).get(k) == x for k, x in want.items()))

def per_model(m, name):
    c = collections.Counter()
    for (n, ls), v in m.items():
        if n == name: c[dict(ls).get("model")] += v
    return c

sizes = {json.loads(l)["name"]: json.loads(l) for l in open(f"{out}/sizes.jsonl")}
a = recs("all")
dur = max(r["atMs"] for r in a) / 1e3
print(f"full run: {len(a)} requests over {dur:.0f} s ({len(a)/dur:.1f}/s), {len(set(r['model'] for r in a))} models called")
codes = collections.Counter(r["code"] or str(r["status"]) for r in a)
print("  outcomes:", dict(codes))
cold = [r for r in a if r["code"] == "cold_start" or (r["status"] // 100 == 2 and r["latencyMs"] >= cold_ms)]
cold_ok = [r["latencyMs"] for r in cold if r["status"] // 100 == 2]
print(f"  client-side cold (cold_start or 2xx >= {cold_ms:.0f} ms): {len(cold)} = {100*len(cold)/len(a):.2f} %; hit ratio {100*(1-len(cold)/len(a)):.2f} %")
print(f"  cold 2xx latency: n {len(cold_ok)} p50 {p(cold_ok,.5):.0f} ms p99 {p(cold_ok,.99):.0f} ms max {max(cold_ok, default=float('nan')):.0f} ms; cold_start refusals {sum(1 for r in cold if r['code']=='cold_start')}")
warm_ok = [r["latencyMs"] for r in a if r["status"] // 100 == 2 and r["latencyMs"] < cold_ms]
print(f"  warm 2xx latency: p50 {p(warm_ok,.5):.2f} ms p99 {p(warm_ok,.99):.2f} ms")
steady = [r for r in a if r["atMs"] / 1e3 >= skip]
sc = sum(1 for r in steady if r["code"] == "cold_start" or (r["status"] // 100 == 2 and r["latencyMs"] >= cold_ms))
print(f"  from {skip:.0f} s on: {len(steady)} requests, cold {sc} = {100*sc/max(len(steady),1):.2f} %, hit ratio {100*(1-sc/max(len(steady),1)):.2f} %")

s = scrapes("all")
if s:
    (t0, m0), (t1, m1) = s[0], s[-1]
    mins = (t1 - t0) / 60
    req = total(m1, "sluice_requests_total") - total(m0, "sluice_requests_total")
    cw = total(m1, "sluice_cold_starts_total", outcome="waited") - total(m0, "sluice_cold_starts_total", outcome="waited")
    cr = total(m1, "sluice_cold_starts_total", outcome="refused") - total(m0, "sluice_cold_starts_total", outcome="refused")
    loads = total(m1, "sluice_worker_loads_total") - total(m0, "sluice_worker_loads_total")
    ev = total(m1, "sluice_evictions_total") - total(m0, "sluice_evictions_total")
    print(f"server side over {mins:.1f} min of scrapes: requests {req:.0f}, cold starts waited {cw:.0f} refused {cr:.0f} "
          f"(hit ratio {100*(1-(cw+cr)/max(req,1)):.2f} %), loads {loads:.0f} ({loads/mins:.1f}/min), evictions {ev:.0f} ({ev/mins:.1f}/min); "
          f"loads before traffic {total(m0, 'sluice_worker_loads_total'):.0f}")
    # per minute
    line = []
    for i in range(1, len(s)):
        if (s[i][0] - t0) // 60 != (s[i-1][0] - t0) // 60 or i == len(s) - 1:
            line.append(s[i])
    prev = (t0, m0)
    pm = []
    for t, m in line:
        pm.append(f"{(t-t0)/60:.1f}m: loads {total(m,'sluice_worker_loads_total')-total(prev[1],'sluice_worker_loads_total'):.0f}, evictions {total(m,'sluice_evictions_total')-total(prev[1],'sluice_evictions_total'):.0f}")
        prev = (t, m)
    print("  per minute:", "; ".join(pm))
    lm = per_model(m1, "sluice_worker_loads_total")
    lm0 = per_model(m0, "sluice_worker_loads_total")
    d = {k: lm[k] - lm0.get(k, 0) for k in lm}
    many = sorted([(v, k) for k, v in d.items() if v > 3], reverse=True)
    print(f"  models loaded more than 3 times during the run: {len(many)}", [(k, int(v), sizes.get(k, {}).get('memoryMiB')) for v, k in many[:15]])
    loaded = sorted([(v, k) for k, v in d.items() if v > 0], reverse=True)
    print(f"  models loaded at least once during the run: {len(loaded)}; loads per model distribution: {collections.Counter(int(v) for v,_ in loaded)}")

# Hottest 10: full run vs alone.
try:
    b = recs("top10")
except FileNotFoundError:
    b = []
top = [f"m{k:03d}" for k in range(1, 11)]
def hot(rs, fr):
    return [r["latencyMs"] for r in rs if r["model"] in top and r["atMs"] / 1e3 >= fr and r["status"] // 100 == 2]
def bad(rs, fr):
    return sum(1 for r in rs if r["model"] in top and r["atMs"] / 1e3 >= fr and r["status"] // 100 != 2)
for fr, name in ((skip, f"from {skip:.0f} s on"), (0, "whole run")):
    x, y = hot(a, fr), hot(b, fr)
    if y:
        print(f"hottest 10, {name}: with all 300 p50 {p(x,.5):.2f} p99 {p(x,.99):.2f} ms (n {len(x)}, non-2xx {bad(a,fr)}); alone p50 {p(y,.5):.2f} p99 {p(y,.99):.2f} ms (n {len(y)}, non-2xx {bad(b,fr)}); ratio of p99 {p(x,.99)/p(y,.99):.2f}x")
    else:
        print(f"hottest 10, {name}: with all 300 p50 {p(x,.5):.2f} p99 {p(x,.99):.2f} ms (n {len(x)}); no alone run")
for k in top:
    x = [r["latencyMs"] for r in a if r["model"] == k and r["atMs"]/1e3 >= skip and r["status"]//100 == 2]
    y = [r["latencyMs"] for r in b if r["model"] == k and r["atMs"]/1e3 >= skip and r["status"]//100 == 2]
    print(f"  {k} ({sizes[k]['memoryMiB']} MiB, {sizes[k]['loadTimeMs']} ms): n {len(x)} p99 {p(x,.99):.2f} ms; alone n {len(y)} p99 {p(y,.99):.2f} ms")
