#!/usr/bin/python3
"""The summary table of bench/issue17.sh: issue 17 item 7's figures, in
process (w0) and with --workers 2 (w2), medians over the rounds of per-round
values (each ratio against the baseline of its own round).

usage: issue17_table.py OUT     (writes OUT/summary.md and OUT/summary.json too)
"""
import glob
import json
import os
import re
import statistics
import sys

OUT = sys.argv[1]
MODES = ("w0", "w2")


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def rounds(step):
    ns = set()
    for p in glob.glob(os.path.join(OUT, step, "*")):
        m = re.search(r"-(\d+)\.(json|txt|cap)$", p)
        if m:
            ns.add(int(m.group(1)))
    return sorted(ns)


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def failed_steps():
    try:
        with open(os.path.join(OUT, "failed.txt")) as f:
            return {line.split(":")[0] for line in f if line.strip()}
    except OSError:
        return set()


FAILED = failed_steps()
rows = []      # (figure, w0 text, w2 text, goal, met text)
details = []   # per-round lines
data = {}      # summary.json


def fmt(x, spec):
    return "n/a" if x is None else format(x, spec)


def verdict(x, ok):
    if x is None:
        return "n/a"
    return "yes" if ok(x) else "no"


def absent(step):
    return "failed" if step in FAILED else "not run"


# --- hop -------------------------------------------------------------------
def p50(j):
    if not j:
        return None
    return j["phases"][0]["okLatencyMs"].get("p50")


rs = rounds("hop")
if rs:
    per = {m: [p50(load(os.path.join(OUT, "hop", f"{m}-{i}.json"))) for i in rs] for m in MODES}
    lag = {m: [(load(os.path.join(OUT, "hop", f"{m}-{i}.json")) or {"phases": [{"dispatchLagMs": {}}]})["phases"][0]["dispatchLagMs"].get("p99") for i in rs] for m in MODES}
    hops = [b - a for a, b in zip(per["w0"], per["w2"]) if a is not None and b is not None]
    h = med(hops)
    data["hop"] = {"p50Ms": per, "hopMs": hops, "medianHopMs": h, "dispatchLagP99Ms": lag}
    rows.append(("hop: fraud p50 at 200/s open loop, w2 − w0 (ms)",
                 f"p50 {fmt(med(per['w0']), '.3f')}",
                 f"p50 {fmt(med(per['w2']), '.3f')}, hop {fmt(h, '+.3f')}",
                 "hop ≤ 0.1 ms", "— / " + verdict(h, lambda x: x <= 0.1)))
    details.append(f"hop p50 ms per round: w0 {per['w0']}, w2 {per['w2']}; hop {[round(x, 3) for x in hops]}; dispatch lag p99 ms w0 {lag['w0']} w2 {lag['w2']}")
else:
    rows.append(("hop: fraud p50 at 200/s open loop, w2 − w0 (ms)", absent("hop"), absent("hop"), "hop ≤ 0.1 ms", "n/a"))

# --- overload --------------------------------------------------------------
rs = rounds("overload")
if rs:
    ov = {}
    for m in MODES:
        caps, srcs, ref, good, n504, acc, floor, codes, lag = [], set(), [], [], 0, [], [], [], []
        for i in rs:
            try:
                with open(os.path.join(OUT, "overload", f"cap-{m}-{i}.cap")) as f:
                    c, src = f.read().strip().split(" ", 1)
                cap = float(c)
                caps.append(cap)
                srcs.add(src)
            except (OSError, ValueError):
                cap = None
            j = load(os.path.join(OUT, "overload", f"over-{m}-{i}.json"))
            if j:
                o = j["phases"][0]
                ref.append(o["refusedLatencyMs"].get("p99"))
                good.append(o["goodput"] / cap if cap else None)
                acc.append(o["okLatencyMs"].get("p99"))
                n504 += sum(p["byStatus"].get("504", 0) for p in j["phases"])
                codes.append(o["byCode"])
                lag.append(o["dispatchLagMs"].get("p99"))
            else:
                ref.append(None), good.append(None), acc.append(None)
            fl = load(os.path.join(OUT, "overload", f"floor-{m}-{i}.json"))
            floor.append(fl["phases"][0]["refusedLatencyMs"].get("p99") if fl else None)
        have = any(x is not None for x in ref)
        ov[m] = {"cap": caps, "capSource": sorted(srcs), "refusedP99Ms": ref, "goodputOverCap": good,
                 "count504": n504 if have else None, "acceptedP99Ms": acc, "floorRefusedP99Ms": floor,
                 "codes": codes, "dispatchLagP99Ms": lag}
        details.append(f"overload {m}: CAP {caps} ({'; '.join(sorted(srcs))}); refused p99 ms {ref}; goodput/CAP {[None if g is None else round(g, 3) for g in good]}; "
                       f"504s {n504}; accepted p99 ms {acc}; floor refused p99 ms {floor}; dispatch lag p99 ms {lag}; codes {codes}")
    data["overload"] = ov

    def both(key, spec, goal, ok, label):
        a, b = med(ov["w0"][key]), med(ov["w2"][key])
        rows.append((label, fmt(a, spec), fmt(b, spec), goal, "—" if ok is None else f"{verdict(a, ok)} / {verdict(b, ok)}"))

    rows.append(("2x overload: CAP, spin2ms (req/s)",
                 f"{fmt(med(ov['w0']['cap']), '.0f')} ({'; '.join(ov['w0']['capSource']) or 'n/a'})",
                 f"{fmt(med(ov['w2']['cap']), '.0f')} ({'; '.join(ov['w2']['capSource']) or 'n/a'})", "—", "—"))
    both("refusedP99Ms", ".2f", "≤ 1 ms", lambda x: x <= 1.0, "2x overload: refused (429/503) p99 (ms)")
    both("floorRefusedP99Ms", ".2f", "— (the HTTP floor)", None, "refusal floor: everything refused, p99 (ms)")
    both("goodputOverCap", ".3f", "≥ 0.95x", lambda x: x >= 0.95, "2x overload: goodput / CAP")
    a, b = ov["w0"]["count504"], ov["w2"]["count504"]
    rows.append((f"2x overload: 504s (all {len(rs)} runs)", fmt(a, "d"), fmt(b, "d"), "0",
                 f"{verdict(a, lambda x: x == 0)} / {verdict(b, lambda x: x == 0)}"))
    both("acceptedP99Ms", ".1f", "≤ 50 ms (deadline)", lambda x: x <= 50, "2x overload: accepted 2xx p99 (ms)")
else:
    for label, goal in (("2x overload: refused (429/503) p99 (ms)", "≤ 1 ms"), ("2x overload: goodput / CAP", "≥ 0.95x"),
                        ("2x overload: 504s", "0")):
        rows.append((label, absent("overload"), absent("overload"), goal, "n/a"))


# --- fastpath --------------------------------------------------------------
def grpcjson(path):
    """rows/s and errors of the /v1 JSON and gRPC lines of bench/grpcjson."""
    out = {}
    try:
        with open(path) as f:
            for line in f:
                cells = [c.strip() for c in line.strip().strip("|").split("|")]
                if len(cells) >= 7 and cells[0].isdigit():
                    key = "json" if cells[1].startswith("/v1") else "grpc"
                    out[key] = float(cells[2])
                    out[key + "Errors"] = int(cells[6])
    except OSError:
        pass
    return out


def xgb(path):
    try:
        with open(path) as f:
            m = re.search(r"inplace_predict batch \d+: [\d.]+ ms/batch, ([\d,]+) rows/s", f.read())
        return float(m.group(1).replace(",", "")) if m else None
    except OSError:
        return None


rs = rounds("fastpath")
if rs:
    fp = {"xgboostRowsPerSec": [xgb(os.path.join(OUT, "fastpath", f"xgboost-{i}.txt")) for i in rs]}
    for m in MODES:
        g = [grpcjson(os.path.join(OUT, "fastpath", f"grpcjson-{m}-{i}.txt")) for i in rs]
        x = fp["xgboostRowsPerSec"]
        fp[m] = {
            "jsonRowsPerSec": [r.get("json") for r in g], "grpcRowsPerSec": [r.get("grpc") for r in g],
            "jsonOverXgb": [r["json"] / b if "json" in r and b else None for r, b in zip(g, x)],
            "grpcOverXgb": [r["grpc"] / b if "grpc" in r and b else None for r, b in zip(g, x)],
            "errors": sum(r.get("jsonErrors", 0) + r.get("grpcErrors", 0) for r in g),
        }
        details.append(f"fastpath {m}: JSON rows/s {fp[m]['jsonRowsPerSec']}, gRPC rows/s {fp[m]['grpcRowsPerSec']}, xgboost rows/s {x}; "
                       f"JSON/xgb {[None if v is None else round(v, 3) for v in fp[m]['jsonOverXgb']]}, gRPC/xgb {[None if v is None else round(v, 3) for v in fp[m]['grpcOverXgb']]}; errors {fp[m]['errors']}")
    data["fastpath"] = fp
    for key, label, goal, lim in (("jsonOverXgb", "1,000-row /v1 JSON / xgboost C nthread=1", "≥ 0.8x", 0.8),
                                  ("grpcOverXgb", "1,000-row gRPC raw FP32 / xgboost C nthread=1", "≥ 1.2x", 1.2)):
        a, b = med(fp["w0"][key]), med(fp["w2"][key])
        ea, eb = fp["w0"]["errors"], fp["w2"]["errors"]
        rows.append((label, fmt(a, ".2f") + (f" ({ea} errors)" if ea else ""), fmt(b, ".2f") + (f" ({eb} errors)" if eb else ""), goal,
                     f"{verdict(a if not ea else None, lambda v: v >= lim)} / {verdict(b if not eb else None, lambda v: v >= lim)}"))
else:
    for label, goal in (("1,000-row /v1 JSON / xgboost C nthread=1", "≥ 0.8x"), ("1,000-row gRPC raw FP32 / xgboost C nthread=1", "≥ 1.2x")):
        rows.append((label, absent("fastpath"), absent("fastpath"), goal, "n/a"))

# --- fraud -----------------------------------------------------------------
rs = rounds("fraud")
if rs:
    tput = lambda p: (load(p) or {}).get("throughput")
    errs = lambda p: (load(p) or {}).get("errors", 0)
    fr = {"bareReqPerSec": [tput(os.path.join(OUT, "fraud", f"bare-{i}.json")) for i in rs]}
    for m in MODES:
        t = [tput(os.path.join(OUT, "fraud", f"{m}-{i}.json")) for i in rs]
        fr[m] = {"reqPerSec": t, "overBare": [a / b if a is not None and b else None for a, b in zip(t, fr["bareReqPerSec"])],
                 "errors": sum(errs(os.path.join(OUT, "fraud", f"{m}-{i}.json")) for i in rs),
                 "errorsByStatus": [(load(os.path.join(OUT, "fraud", f"{m}-{i}.json")) or {}).get("errorsByStatus") for i in rs]}
        details.append(f"fraud {m}: req/s {[None if v is None else round(v) for v in t]}, bare {[None if v is None else round(v) for v in fr['bareReqPerSec']]}, "
                       f"ratio {[None if v is None else round(v, 3) for v in fr[m]['overBare']]}, non-2xx {fr[m]['errors']} by status {fr[m]['errorsByStatus']} (0: no answer)")
    data["fraud"] = fr
    a, b = med(fr["w0"]["overBare"]), med(fr["w2"]["overBare"])
    ea, eb = fr["w0"]["errors"], fr["w2"]["errors"]
    rows.append(("1-row fraud saturation / bare net/http", fmt(a, ".2f") + (f" ({ea} non-2xx)" if ea else ""),
                 fmt(b, ".2f") + (f" ({eb} non-2xx)" if eb else ""), "≥ 0.7x",
                 f"{verdict(a, lambda v: v >= 0.7)} / {verdict(b, lambda v: v >= 0.7)}"))
else:
    rows.append(("1-row fraud saturation / bare net/http", absent("fraud"), absent("fraud"), "≥ 0.7x", "n/a"))

# --- print -----------------------------------------------------------------
lines = []
try:
    with open(os.path.join(OUT, "meta.txt")) as f:
        lines += ["    " + line.rstrip() for line in f]
except OSError:
    pass
try:
    with open(os.path.join(OUT, "loadavg.txt")) as f:
        la = [float(line.split()[-3]) for line in f if line.strip()]
    if la:
        lines.append(f"    load average (1 min) during the run: {min(la):.2f}–{max(la):.2f}")
        data["loadavg1m"] = [min(la), max(la)]
except (OSError, ValueError, IndexError):
    pass
if any("SHORT=1" in line for line in lines):
    lines.append("    SHORT=1: smoke-test durations (1-2 s per measurement); these are not figures")
lines += ["", "| figure | in-process (w0) | --workers 2 (w2) | goal | met? (w0 / w2) |", "|---|---|---|---|---|"]
lines += [f"| {' | '.join(r)} |" for r in rows]
lines += ["", "Medians over the rounds of per-round values; per round:", ""] + [f"- {d}" for d in details]
if FAILED:
    lines += ["", f"FAILED steps: {', '.join(sorted(FAILED))} (OUT/failed.txt)"]
text = "\n".join(lines) + "\n"
sys.stdout.write(text)
with open(os.path.join(OUT, "summary.md"), "w") as f:
    f.write(text)
data["rows"] = [dict(zip(("figure", "w0", "w2", "goal", "met"), r)) for r in rows]
with open(os.path.join(OUT, "summary.json"), "w") as f:
    json.dump(data, f, indent=1)
