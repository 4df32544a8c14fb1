#!/usr/bin/python3
"""xgboost's own CPU predictor on the Go BenchmarkPredictCategorical's model
and rows: cat_softprob (18 trees, categorical and numerical splits, 3
classes) on the 174 rows of cat_rows.json repeated to 1024, one thread.
The rows go in as a pandas frame with category columns (what the model was
trained on), built from the codes; codes a frame cannot hold (negative,
fractional, past the last category) become missing, as pandas would make
them. Median of 7 timed runs:

  taskset -c 1 /usr/bin/python3 scripts/bench_xgboost_categorical.py
"""
import json
import os
import statistics
import time

import numpy as np
import pandas as pd
import xgboost as xgb

TD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                  "internal", "runtime", "xgboost", "testdata")


def main():
    with open(os.path.join(TD, "cat_rows.json")) as f:
        spec = json.load(f)
    X = np.array(spec["rows"], dtype=np.uint32).view(np.float32)
    X = np.tile(X, (1024 // len(X) + 1, 1))[:1024]
    cols = {}
    for j, name in enumerate(spec["names"]):
        cats = spec["categories"].get(name)
        if cats is None:
            cols[name] = X[:, j]
            continue
        c = X[:, j]
        ok = (c >= 0) & (c < len(cats)) & (c == np.floor(c))
        codes = np.where(ok, np.nan_to_num(c, nan=-1), -1).astype(np.int64)
        cols[name] = pd.Categorical.from_codes(codes, categories=cats)
    df = pd.DataFrame(cols)
    b = xgb.Booster(model_file=os.path.join(TD, "cat_softprob.json"))
    b.set_param({"nthread": 1})
    for _ in range(3):
        b.inplace_predict(df)
    ts = []
    for _ in range(7):
        t0 = time.perf_counter()
        for _ in range(20):
            b.inplace_predict(df)
        ts.append((time.perf_counter() - t0) / 20)
    t = statistics.median(ts)
    print(f"xgboost {xgb.__version__} inplace_predict categorical batch {len(df)}: {t*1e3:.3f} ms/batch, {len(df)/t:,.0f} rows/s")


if __name__ == "__main__":
    main()
