#!/usr/bin/python3
"""Train the `churn` example: scikit-learn LogisticRegression on a synthetic
customer-churn dataset, exported as Sluice's linear artifact, with golden
examples computed by scikit-learn itself.

Run with Debian's python (the pyenv python3 cannot see python3-sklearn):
    /usr/bin/python3 scripts/make_linear_example.py
"""
import json
import math
import os

import numpy as np
from sklearn.linear_model import LogisticRegression

OUT = os.path.join(os.path.dirname(__file__), "..", "examples", "churn")
PLANS = ["basic", "pro", "team"]
TENURE_MEAN, TENURE_STD = 24.0, 12.0

rng = np.random.default_rng(7)
n = 5000
tenure = rng.gamma(2.0, 12.0, n)             # months
tickets = rng.poisson(1.5, n)                # support tickets last 30 days
plan = rng.integers(0, 3, n)
logit = -1.0 - 0.06 * tenure + 0.55 * tickets - 0.4 * (plan == 1) - 0.9 * (plan == 2)
y = rng.random(n) < 1 / (1 + np.exp(-logit))


def features(tenure, tickets, plan):
    """The preprocessing model.yaml declares: standardize(tenureMonths),
    log1p(supportTickets), onehot(plan)."""
    t = (np.asarray(tenure, dtype=np.float64) - TENURE_MEAN) / TENURE_STD
    k = np.log1p(np.asarray(tickets, dtype=np.float64))
    oh = np.eye(3)[np.asarray(plan)]
    return np.column_stack([t, k, oh]).astype(np.float32)


X = features(tenure, tickets, plan)
clf = LogisticRegression(C=1.0, max_iter=1000).fit(X, y)
artifact = {"weights": [clf.coef_[0].tolist()], "bias": clf.intercept_.tolist(), "link": "logistic"}
with open(os.path.join(OUT, "model.json"), "w") as f:
    json.dump(artifact, f, indent=1)

examples = [(3, 4, 0), (40, 0, 2), (12, 1, 1)]
golden = []
for t, k, p in examples:
    prob = clf.predict_proba(features([t], [k], [p]))[0, 1]
    golden.append({"instance": {"tenureMonths": t, "supportTickets": k, "plan": PLANS[p]},
                   "expect": {"churnProbability": float(prob)}})
# Drift reference sample: 1000 raw instances from the training distribution.
with open(os.path.join(OUT, "reference.jsonl"), "w") as f:
    for i in range(1000):
        f.write(json.dumps({"tenureMonths": round(float(tenure[i]), 2), "supportTickets": int(tickets[i]),
                            "plan": PLANS[int(plan[i])]}) + "\n")
with open(os.path.join(OUT, "golden.json"), "w") as f:
    json.dump(golden, f, indent=1)
print(json.dumps(golden, indent=1))
