#!/usr/bin/env python3
"""Summarise bench/poison.sh: OUT folder, run number.

    bench/poison_table.py /tmp/h-bench11/poison 1

Which models other than the poison saw any non-2xx answer, before and after
the quarantine (the first server log line that says "quarantin", by wall
time against the generator's start), split by how their shard
(bench/shardof: cluster.Shard over worker-1..4, k 2) relates to the
poison's: the same two workers, one worker in common, none.
"""
import json, sys, collections, re, datetime

out, run = sys.argv[1], sys.argv[2]
shards = {}
for l in open(f"{out}/shards.jsonl"):
    d = json.loads(l)
    shards[d["model"]] = d
summ = json.load(open(f"{out}/run{run}.json"))
start = summ["startUnixMs"] / 1e3
tq = None
qline = None
for l in open(f"{out}/server-run{run}.log"):
    if "quarantin" in l.lower():
        m = re.search(r'time=(\S+)', l)
        if m:
            tq = datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp() - start
            qline = l.strip()
            break
exits = []
for l in open(f"{out}/server-run{run}.log"):
    if "worker exited" in l:
        m = re.search(r'time=(\S+)', l)
        w = re.search(r'worker=(\S+)|id=(\S+)', l)
        exits.append((round(datetime.datetime.fromisoformat(m.group(1).replace("Z", "+00:00")).timestamp() - start, 1), (w.group(1) or w.group(2)) if w else "?"))
print(f"worker exits (s after start, worker): {exits}")
print(f"quarantine at {tq:.1f} s: {qline}" if tq is not None else "no quarantine in the log")
recs = [json.loads(l) for l in open(f"{out}/run{run}.jsonl")]
poison = [m for m in set(r["model"] for r in recs) if m not in shards]
print(f"poison: {poison}; requests {len(recs)}")
def classify(m):
    d = shards[m]
    return "same shard" if d["sameShard"] else ("one worker in common" if d["overlapCount"] else "disjoint shard")
groups = collections.Counter(classify(m) for m in shards)
t1 = exits[0][0] if exits else None
for phase, cond in (("before the first worker exit", lambda r: t1 is None or r["atMs"]/1e3 < t1),
                    ("from the first exit to the quarantine", lambda r: t1 is not None and t1 <= r["atMs"]/1e3 and (tq is None or r["atMs"]/1e3 < tq)),
                    ("after quarantine", lambda r: tq is not None and r["atMs"]/1e3 >= tq)):
    errm = collections.defaultdict(collections.Counter)
    for r in recs:
        if r["model"] in shards and r["status"] // 100 != 2 and cond(r):
            errm[r["model"]][r["code"] or str(r["status"])] += 1
    by = collections.Counter(classify(m) for m in errm)
    n = sum(1 for r in recs if cond(r))
    print(f"{phase} ({n} requests): {len(errm)} of {len(shards)} other models saw an error = {100*len(errm)/len(shards):.0f} %")
    for g in ("same shard", "one worker in common", "disjoint shard"):
        print(f"  {g}: {by[g]} of {groups[g]}")
    for m in sorted(errm):
        print(f"    {m} {shards[m]['shard']} {classify(m)}: {dict(errm[m])}")
pr = [r for r in recs if r["model"] in poison]
print("poison's own outcomes:", dict(collections.Counter(r["code"] or str(r["status"]) for r in pr)))
