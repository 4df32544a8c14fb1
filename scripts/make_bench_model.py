#!/usr/bin/python3
"""Train the 500-tree benchmark model and the 1000 benchmark rows.

Writes into internal/runtime/xgboost/testdata/:
  bench500.ubj          binary:logistic gbtree, 500 trees, depth 6, 30 features
  bench_rows.f32        1000 rows x 30 float32, little-endian, NaN = missing
  bench500.expect.json  xgboost's margins for those rows (float32 bits)

The model is committed as UBJSON because the JSON form is several MB;
bench500.json is also written (not committed) when --json is given.

  /usr/bin/python3 scripts/make_bench_model.py [--json]
"""
import json
import os
import sys

import numpy as np
import xgboost as xgb

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                   "internal", "runtime", "xgboost", "testdata")
NF = 30
SEED = 7


def data(rng, n):
    X = rng.normal(size=(n, NF)).astype(np.float32)
    X[rng.random((n, NF)) < 0.05] = np.nan
    return X


def main():
    rng = np.random.default_rng(SEED)
    X = data(rng, 50000)
    Z = np.nan_to_num(X)
    w = rng.normal(size=NF)
    s = Z @ w * 0.3 + np.sin(2 * Z[:, 0]) * Z[:, 1] + (Z[:, 2] > 0.5) * Z[:, 3] ** 2
    y = (s + rng.normal(scale=1.0, size=len(s)) > 0).astype(np.float32)
    params = {"objective": "binary:logistic", "max_depth": 6, "eta": 0.05,
              "tree_method": "hist", "seed": 1, "nthread": 2}
    b = xgb.train(params, xgb.DMatrix(X, label=y), 500)
    b.save_model(os.path.join(OUT, "bench500.ubj"))
    if "--json" in sys.argv:
        b.save_model(os.path.join(OUT, "bench500.json"))
    rows = data(np.random.default_rng(SEED + 1), 1000)
    rows.astype("<f4").tofile(os.path.join(OUT, "bench_rows.f32"))
    lb = xgb.Booster(model_file=os.path.join(OUT, "bench500.ubj"))
    lb.set_param({"nthread": 1})
    m = lb.predict(xgb.DMatrix(rows), output_margin=True).astype(np.float32)
    with open(os.path.join(OUT, "bench500.expect.json"), "w") as f:
        json.dump({"margin": m.view(np.uint32).tolist()}, f, separators=(",", ":"))
    for n in ("bench500.ubj", "bench500.json", "bench_rows.f32", "bench500.expect.json"):
        p = os.path.join(OUT, n)
        if os.path.exists(p):
            print(f"{n}: {os.path.getsize(p)} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
