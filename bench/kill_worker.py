#!/usr/bin/env python3
"""kill -9 one worker and time its way back (issue 9; bench/kill_worker.sh).

usage: kill_worker.py SERVER WORKER_ID OUT.json

Reads GET SERVER/v1/workers, sends SIGKILL to WORKER_ID's pid, then polls
every 10 ms until the gateway lists that worker again with a new pid, state
ready and every version it held before the kill ready with at least one
ready replica. Writes the times (seconds after the kill) to OUT.json.
"""
import json
import os
import signal
import sys
import time
import urllib.request

server, wid, out = sys.argv[1], sys.argv[2], sys.argv[3]


def workers():
    with urllib.request.urlopen(server.rstrip("/") + "/v1/workers", timeout=2) as r:
        return {w["id"]: w for w in json.load(r)["workers"]}


before = workers()[wid]
held = sorted(v["version"] for v in before["versions"] if v["state"] == "ready")
t0 = time.monotonic()
os.kill(before["pid"], signal.SIGKILL)
res = {"worker": wid, "oldPid": before["pid"], "versions": held}
while time.monotonic() - t0 < 30:
    try:
        w = workers().get(wid)
    except OSError:
        w = None
    now = time.monotonic() - t0
    if w is not None:
        if w["state"] != "ready" and "seenDownSeconds" not in res:
            res["seenDownSeconds"] = now
        if w["pid"] != before["pid"] and "newPidSeconds" not in res:
            res["newPidSeconds"], res["newPid"] = now, w["pid"]
        ready = {v["version"] for v in w["versions"] if v["state"] == "ready" and v["readyReplicas"] > 0}
        if w["pid"] != before["pid"] and w["state"] == "ready" and set(held) <= ready:
            res["backReadySeconds"] = now
            break
    time.sleep(0.01)
print(f"kill_worker: {json.dumps(res)}", file=sys.stderr)
with open(out, "w") as f:
    json.dump(res, f, indent=1)
    f.write("\n")
