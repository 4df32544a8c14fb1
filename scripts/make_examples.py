#!/usr/bin/python3
"""Train the example models shipped in examples/ and their golden examples.

  examples/fraud/model.json   binary:logistic gbtree on a synthetic card-fraud
                              set (fixed seed, 20k rows)
  examples/iris/model.json    multi:softprob gbtree on sklearn's iris
  examples/<name>/golden.json three {"instance": raw fields, "expect": outputs}
                              with xgboost's own predictions (the float32 a
                              model produces, printed as the shortest Python
                              float that round-trips to it)

Fraud features, in this order, after preprocessing the raw fields:
  [log1p(amount), accountAgeDays, declines5m (NaN if missing),
   country==US, country==GB, country==DE]
One-hot columns are 0/1; when country is missing all three are NaN.
Iris features: [sepalLength, sepalWidth, petalLength, petalWidth], raw.

  /usr/bin/python3 scripts/make_examples.py
"""
import json
import math
import os

import numpy as np
import xgboost as xgb
from sklearn.datasets import load_iris

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
COUNTRIES = ["US", "GB", "DE"]


def f32(x):
    """Shortest repr of a float32, as a Python float."""
    return float(repr(np.float32(x)))


def fraud_features(inst):
    """The preprocessing the package schema must reproduce."""
    amount = inst["amount"]
    d = inst.get("declines5m")
    c = inst.get("country")
    row = [math.log1p(amount), float(inst["accountAgeDays"]),
           float("nan") if d is None else float(d)]
    if c is None:
        row += [float("nan")] * 3
    else:
        row += [1.0 if c == k else 0.0 for k in COUNTRIES]
    return row


def fraud():
    rng = np.random.default_rng(1234)
    n = 20000
    amount = np.round(rng.lognormal(mean=3.8, sigma=1.2, size=n), 2)
    age = rng.integers(0, 3650, size=n)
    declines = rng.poisson(0.3, size=n).astype(float)
    country = rng.choice(COUNTRIES + [None], p=[0.55, 0.2, 0.17, 0.08], size=n)
    # fraud is likelier for big amounts, young accounts, recent declines
    # and, here, cards from outside the US
    z = (-5.0 + 0.55 * np.log1p(amount) - 0.0015 * age + 0.9 * declines
         + np.array([{"US": 0.0, "GB": 0.4, "DE": 0.6, None: 0.9}[c] for c in country]))
    y = (rng.random(n) < 1 / (1 + np.exp(-z))).astype(np.float32)
    declines[rng.random(n) < 0.1] = np.nan  # the feed sometimes lacks it
    X = np.array([fraud_features({"amount": a, "accountAgeDays": int(g),
                                  "declines5m": None if np.isnan(d) else int(d),
                                  "country": c})
                  for a, g, d, c in zip(amount, age, declines, country)], dtype=np.float32)
    params = {"objective": "binary:logistic", "max_depth": 4, "eta": 0.1,
              "tree_method": "hist", "seed": 1, "nthread": 2}
    b = xgb.train(params, xgb.DMatrix(X, label=y, missing=np.nan), 100)
    path = os.path.join(ROOT, "examples", "fraud", "model.json")
    b.save_model(path)
    lb = xgb.Booster(model_file=path)
    instances = [
        {"amount": 800, "accountAgeDays": 91, "declines5m": 3, "country": "US"},
        {"amount": 12.5, "accountAgeDays": 2400, "declines5m": 0, "country": "GB"},
        {"amount": 250, "accountAgeDays": 10},  # declines5m and country absent
    ]
    rows = np.array([fraud_features(i) for i in instances], dtype=np.float32)
    p = lb.predict(xgb.DMatrix(rows, missing=np.nan))
    golden = [{"instance": i, "expect": {"riskScore": f32(v)}} for i, v in zip(instances, p)]
    write_golden("fraud", golden)
    print("fraud: base rate %.4f, features %s" % (y.mean(), rows.tolist()))


def iris():
    ds = load_iris()
    X = ds.data.astype(np.float32)
    params = {"objective": "multi:softprob", "num_class": 3, "max_depth": 3, "eta": 0.3,
              "tree_method": "hist", "seed": 1, "nthread": 2}
    b = xgb.train(params, xgb.DMatrix(X, label=ds.target), 10)  # 10 rounds x 3 classes = 30 trees
    path = os.path.join(ROOT, "examples", "iris", "model.json")
    b.save_model(path)
    lb = xgb.Booster(model_file=path)
    idx = [0, 75, 140]  # one of each species
    keys = ["sepalLength", "sepalWidth", "petalLength", "petalWidth"]
    p = lb.predict(xgb.DMatrix(X[idx]))
    golden = []
    for i, probs in zip(idx, p):
        inst = {k: float(repr(np.float32(v))) for k, v in zip(keys, X[i])}
        golden.append({"instance": inst,
                       "expect": {name: f32(v) for name, v in zip(["setosa", "versicolor", "virginica"], probs)}})
    write_golden("iris", golden)


def write_golden(name, golden):
    path = os.path.join(ROOT, "examples", name, "golden.json")
    with open(path, "w") as f:
        json.dump(golden, f, indent=2)
        f.write("\n")
    print(open(path).read())


if __name__ == "__main__":
    fraud()
    iris()
