#!/usr/bin/python3
"""Prints issue 20's goals table from bench/jobs's OUT/results.json."""
import json, sys

r = json.load(open(sys.argv[1] + "/results.json"))
rows = []
if "a" in r:
    a = r["a"]
    rows.append(("1M-row JSONL, fraud model, rows/s vs the same rows sent as 1,000-row `/v1` requests by a client", "client loop", "≥ 1.5x",
                 "%.2fx: job %s rows/s (runs %s) vs client loop %s rows/s (runs %s)" % (a["ratio"], f"{a['jobMedian']:,.0f}", ", ".join(f"{x:,.0f}" for x in a["jobRowsPerSecond"]),
                  f"{a['loopMedian']:,.0f}", ", ".join(f"{x:,.0f}" for x in a["loopRowsPerSecond"])), a["ratio"] >= 1.5))
if "b" in r:
    b = r["b"]
    rows.append(("online p99 with a job running vs without (online at 50 % of capacity)", "none measured", "≤ 1.1x",
                 "%.2fx: p99 %.2f ms with vs %.2f ms without (runs %s / %s ms), online %s req/s of a capacity of %s req/s; errors with the job %s of %s" % (
                     b["p99Ratio"], b["p99WithMedian"], b["p99WithoutMedian"], ", ".join("%.2f" % w["p99Ms"] for w in b["with"]), ", ".join("%.2f" % w["p99Ms"] for w in b["without"]),
                     f"{b['onlineRate']:,.0f}", f"{b['capacity']:,.0f}", "+".join(str(w["errors"]) for w in b["with"]), "+".join(str(w["n"]) for w in b["with"])), b["p99Ratio"] <= 1.1))
    rows.append(("idle capacity the job uses meanwhile", "—", "≥ 80 %",
                 "%.0f %%: job %s rows/s during the online load vs %s rows/s alone (runs %s %%)" % (100 * b["idleUsedMedian"],
                  ", ".join(f"{x:,.0f}" for x in b["jobDuringRowsPerSecond"]), ", ".join(f"{x:,.0f}" for x in b["jobAloneRowsPerSecond"]),
                  ", ".join("%.0f" % (100 * x) for x in b["idleUsed"])), b["idleUsedMedian"] >= 0.8))
if "d" in r:
    d = r["d"]
    by = {}
    for k, red, dup, mis in zip(d["chunksInFlight"], d["rowsRedone"], d["duplicates"], d["missing"]):
        by.setdefault(k, []).append((red, dup, mis))
    txt = "; ".join("--job-chunks-in-flight %s: %s rows (chunkRows %d)" % (k, ", ".join(str(x[0]) for x in v), d["chunkRows"]) for k, v in sorted(by.items()))
    rows.append(("kill -9 mid-job: rows redone", "Ray: all", "≤ one chunk", txt, max(d["rowsRedone"]) <= d["chunkRows"]))
    rows.append(("duplicate or missing ids in the output after kill -9 + resume", "—", "0",
                 "%d duplicate, %d missing over %d runs of %s rows" % (sum(d["duplicates"]), sum(d["missing"]), len(d["rowsRedone"]), f"{d['rows']:,}"),
                 sum(d["duplicates"]) + sum(d["missing"]) == 0))
if "f" in r:
    f = r["f"]
    rows.append(("server RSS while a 10 GB input streams", "SageMaker fails at 600 MB", "≤ 200 MB above idle",
                 "+%.0f MB: idle %d MB, peak %d MB (scan %d MB) over a %.2f GB CSV of %s rows, %s scored in %.0f s (%s)" % (
                     f["aboveIdleMB"], f["idleRSSKB"] >> 10, f["peakRSSKB"] >> 10, f["peakRSSScanKB"] >> 10, f["bytes"] / 2**30, f"{f['rows']:,}", f"{f['rowsDone']:,}", f["seconds"], f["state"]),
                 f["aboveIdleMB"] <= 200))
print("| figure | anchor | goal | measured | met? |")
print("| --- | --- | --- | --- | --- |")
for fig, anc, goal, got, met in rows:
    print(f"| {fig} | {anc} | {goal} | {got} | {'yes' if met else '**no**'} |")
print()
print("machine before the run:", r.get("uptimeBefore"))
