#!/usr/bin/python3
"""Train small real XGBoost models and record XGBoost's own predictions.

Writes into internal/runtime/xgboost/testdata/:
  rows.json           test rows (float32 bit patterns, NaN included)
  <case>.json         the model as saved by Booster.save_model (JSON)
  <case>.ubj          a UBJSON copy, for some cases
  <case>.expect.json  xgboost's predict(output_margin=True) and predict(),
                      as float32 bit patterns, so Go can compare exactly

Run with Debian's interpreter (the one that sees python3-xgboost):
  /usr/bin/python3 scripts/make_xgboost_fixtures.py
"""
import json
import os
import sys

import numpy as np
import xgboost as xgb

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                   "internal", "runtime", "xgboost", "testdata")
NF = 8          # features
N_TRAIN = 2000
N_TEST = 160
SEED = 20240601


def bits(a):
    """float32 array -> list of uint32 bit patterns (exact, NaN-safe)."""
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).tolist()


def make_data(rng, n):
    X = rng.normal(size=(n, NF)).astype(np.float32)
    X[:, 3] = rng.integers(0, 5, size=n)              # a discrete feature
    X[:, 5] = np.exp(X[:, 5])                         # a skewed one
    X[rng.random((n, NF)) < 0.12] = np.nan            # missing values
    X[rng.random(n) < 0.02] = np.nan                  # some all-missing rows
    return X


def signal(X):
    Z = np.nan_to_num(X, nan=0.0).astype(np.float64)
    return 1.2 * Z[:, 0] - 0.8 * Z[:, 1] * (Z[:, 2] > 0) + 0.5 * Z[:, 3] - 0.3 * Z[:, 5]


def threshold_rows(booster, X):
    """Rows whose features sit exactly on split thresholds (and 1 ulp
    either side), to pin down the '<' comparison."""
    dump = json.loads(booster.save_raw("json").decode())
    trees = dump["learner"]["gradient_booster"]["model"]["trees"]
    rows = []
    for t in trees[:4]:
        for i, l in enumerate(t["left_children"]):
            if l == -1:
                continue
            f = t["split_indices"][i]
            c = np.float32(t["split_conditions"][i])
            for v in (c, np.nextafter(c, np.float32(-np.inf)), np.nextafter(c, np.float32(np.inf))):
                r = X[len(rows) % len(X)].copy()
                r[f] = v
                rows.append(r)
            if len(rows) >= 24:
                return np.array(rows, dtype=np.float32)
    return np.array(rows, dtype=np.float32)


CASES = [
    # name, params, rounds, label kind, write ubj
    ("binary_logistic", {"objective": "binary:logistic", "max_depth": 4, "eta": 0.3}, 20, "binary", True),
    ("binary_logitraw", {"objective": "binary:logitraw", "max_depth": 3, "base_score": 0.3}, 12, "binary", False),
    ("reg_squarederror", {"objective": "reg:squarederror", "max_depth": 4, "base_score": 1.5}, 15, "reg", False),
    ("reg_logistic", {"objective": "reg:logistic", "max_depth": 3, "base_score": 0.37}, 12, "prob", False),
    ("count_poisson", {"objective": "count:poisson", "max_depth": 3, "base_score": 2.5}, 12, "count", False),
    ("multi_softprob", {"objective": "multi:softprob", "num_class": 3, "max_depth": 3}, 8, "class3", True),
    ("multi_softmax", {"objective": "multi:softmax", "num_class": 4, "max_depth": 2}, 6, "class4", False),
    # a random-forest-style model: several parallel trees per round
    ("parallel_trees", {"objective": "binary:logistic", "max_depth": 3, "num_parallel_tree": 3,
                        "subsample": 0.8, "colsample_bynode": 0.8}, 4, "binary", True),
    # exact + pruning, which can leave deleted nodes in the arrays
    ("pruned_exact", {"objective": "reg:squarederror", "tree_method": "exact", "max_depth": 6,
                      "gamma": 40.0}, 6, "reg", False),
    # tiny models: fuzz seeds (see scripts/xgboost_fuzz_corpus.go)
    ("tiny_binary", {"objective": "binary:logistic", "max_depth": 2}, 2, "binary", True),
    ("tiny_softprob", {"objective": "multi:softprob", "num_class": 3, "max_depth": 1}, 1, "class3", True),
]


def labels(kind, X, rng):
    s = signal(X)
    n = len(X)
    if kind == "binary":
        return (s + rng.normal(scale=0.5, size=n) > 0).astype(np.float32)
    if kind == "reg":
        return (s + rng.normal(scale=0.3, size=n) + 1.5).astype(np.float32)
    if kind == "prob":
        return (1 / (1 + np.exp(-s))).astype(np.float32)
    if kind == "count":
        return rng.poisson(np.exp(0.4 * s + 0.5)).astype(np.float32)
    if kind == "class3":
        return np.digitize(s + rng.normal(scale=0.3, size=n), [-0.7, 0.7]).astype(np.float32)
    if kind == "class4":
        return np.digitize(s + rng.normal(scale=0.3, size=n), [-1, 0, 1]).astype(np.float32)
    raise ValueError(kind)


def unsupported(rng):
    """Real models the runtime must refuse: dart, gblinear, categorical."""
    X = make_data(rng, 300)
    y = (np.nan_to_num(X[:, 0]) > 0).astype(np.float32)
    out = []
    for name, params in [
        ("unsupported_dart", {"booster": "dart", "objective": "binary:logistic", "max_depth": 2}),
        ("unsupported_gblinear", {"booster": "gblinear", "objective": "binary:logistic"}),
    ]:
        b = xgb.train(dict(params, seed=1, nthread=1), xgb.DMatrix(X, label=y), 2)
        b.save_model(os.path.join(OUT, name + ".json"))
        out.append(name + ".json")
    Xc = rng.integers(0, 4, size=(300, 2)).astype(np.float32)
    yc = (Xc[:, 0] == 2).astype(np.float32)
    d = xgb.DMatrix(Xc, label=yc, feature_types=["c", "q"], enable_categorical=True)
    b = xgb.train({"tree_method": "hist", "max_depth": 2, "max_cat_to_onehot": 1, "seed": 1, "nthread": 1}, d, 2)
    b.save_model(os.path.join(OUT, "unsupported_categorical.ubj"))
    out.append("unsupported_categorical.ubj")
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(SEED)
    Xtr = make_data(rng, N_TRAIN)
    Xte = make_data(rng, N_TEST)
    first = None
    written = []
    for name, params, rounds, kind, ubj in CASES:
        y = labels(kind, Xtr, rng)
        p = dict(params, seed=1, nthread=1)
        p.setdefault("tree_method", "hist")
        b = xgb.train(p, xgb.DMatrix(Xtr, label=y, missing=np.nan), rounds)
        if first is None:
            # threshold rows come from the first model and go into the
            # shared test set used by every case
            first = threshold_rows(b, Xte)
            Xte = np.vstack([Xte, first]).astype(np.float32)
            with open(os.path.join(OUT, "rows.json"), "w") as f:
                json.dump({"cols": NF, "rows": [bits(r) for r in Xte]}, f, separators=(",", ":"))
            written.append("rows.json")
        path = os.path.join(OUT, name + ".json")
        b.save_model(path)
        written.append(name + ".json")
        if ubj:
            b.save_model(os.path.join(OUT, name + ".ubj"))
            written.append(name + ".ubj")
        # Reload from the saved file so the predictions are those of the
        # artifact, not of the in-memory booster.
        lb = xgb.Booster(model_file=path)
        lb.set_param({"nthread": 1})
        d = xgb.DMatrix(Xte, missing=np.nan)
        margin = lb.predict(d, output_margin=True).astype(np.float32).reshape(len(Xte), -1)
        pred = lb.predict(d).astype(np.float32).reshape(len(Xte), -1)
        exp = {"model": name, "objective": params["objective"], "xgboost": xgb.__version__,
               "margin": [bits(r) for r in margin], "pred": [bits(r) for r in pred]}
        with open(os.path.join(OUT, name + ".expect.json"), "w") as f:
            json.dump(exp, f, separators=(",", ":"))
        written.append(name + ".expect.json")
    written += unsupported(rng)
    total = sum(os.path.getsize(os.path.join(OUT, w)) for w in written)
    print(f"xgboost {xgb.__version__}: wrote {len(written)} files, {total} bytes, into {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
