#!/usr/bin/env python3
"""Simulate an A/B experiment's users against a running Sluice.

For each of --units users (routing key user-N) it sends one prediction to
--model, reads which version answered (modelVersion), and then posts one
outcome per prediction to POST /v1/outcomes: 1 with the probability
--rate gives that version (e.g. --rate 1=0.20 --rate 2=0.25: version 2
converts 25 % better), 0 otherwise. Standard library only; used by the
worked example of docs/releases.md ("An A/B experiment, end to end").

  /usr/bin/python3 scripts/ab_simulate.py --model fraud --units 4000 --rate 1=0.20 --rate 2=0.25
"""
import argparse
import json
import os
import random
import sys
import time
import urllib.error
import urllib.request


def post(url, body, key, request_id=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    if key:
        req.add_header("Authorization", "Bearer " + key)
    if request_id:
        req.add_header("X-Request-Id", request_id)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.load(r)
    except urllib.error.HTTPError as e:
        sys.exit(f"ab_simulate: {url}: {e.code} {e.read().decode(errors='replace')}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", default=os.environ.get("SLUICE_SERVER", "http://127.0.0.1:8080"))
    ap.add_argument("--model", default="fraud")
    ap.add_argument("--instance", default='{"amount": 80, "accountAgeDays": 91, "declines5m": 0, "country": "US"}',
                    help="one instance of the model (JSON)")
    ap.add_argument("--units", type=int, default=4000, help="users, one prediction each")
    ap.add_argument("--rate", action="append", default=[], metavar="VERSION=P",
                    help="conversion probability of the users a version answered (repeat per version)")
    ap.add_argument("--metric", default="converted", help="the outcome's name")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--prefix", default="sim-%d" % int(time.time()), help="request id prefix")
    a = ap.parse_args()
    rates = {}
    for r in a.rate:
        v, _, p = r.partition("=")
        rates[int(v)] = float(p)
    key = os.environ.get("SLUICE_API_KEY", "")
    rng = random.Random(a.seed)
    inst = json.loads(a.instance)
    answered, outcomes = {}, []
    for i in range(a.units):
        rid = f"{a.prefix}-{i}"
        resp = post(f"{a.server}/v1/models/{a.model}:predict", {"instances": [inst], "routingKey": f"user-{i}"}, key, rid)
        v = int(resp["modelVersion"].split("@")[1])
        answered[v] = answered.get(v, 0) + 1
        outcomes.append({"requestId": rid, "name": a.metric, "value": 1 if rng.random() < rates.get(v, 0) else 0})
    print("predictions per version:", dict(sorted(answered.items())))
    time.sleep(0.5)  # the joins are written within 200 ms of the answers
    total = {"accepted": 0, "duplicates": 0, "unknown": 0}
    for i in range(0, len(outcomes), 1000):
        r = post(f"{a.server}/v1/outcomes", {"outcomes": outcomes[i:i + 1000]}, key)
        for k in total:
            total[k] += r[k]
    print("outcomes:", total)


if __name__ == "__main__":
    main()
