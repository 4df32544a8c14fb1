#!/usr/bin/python3
"""xgboost's own CPU predictor on the Go benchmark's model and rows.

Uses internal/runtime/xgboost/testdata/bench500.ubj and bench_rows.f32 (see
make_bench_model.py), one thread, and reports the median of several runs:
  - batch: inplace_predict on all 1000 rows at once (rows/s)
  - single row: inplace_predict on one row (latency, rows/s)
Also times Booster.predict(DMatrix) for reference (a fresh DMatrix per call,
since predict caches per DMatrix; construction is inside the timed region).

  taskset -c 1 /usr/bin/python3 scripts/bench_xgboost.py
"""
import os
import statistics
import time

import numpy as np
import xgboost as xgb

TD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                  "internal", "runtime", "xgboost", "testdata")


def median_time(fn, reps, runs=7):
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        ts.append((time.perf_counter() - t0) / reps)
    return statistics.median(ts)


def main():
    b = xgb.Booster(model_file=os.path.join(TD, "bench500.ubj"))
    b.set_param({"nthread": 1, "predictor": "cpu_predictor"})
    nf = b.num_features()
    rows = np.fromfile(os.path.join(TD, "bench_rows.f32"), dtype="<f4").reshape(-1, nf)
    n = len(rows)
    # warm up
    for _ in range(3):
        b.inplace_predict(rows)
    t = median_time(lambda: b.inplace_predict(rows), reps=10)
    print(f"xgboost {xgb.__version__} inplace_predict batch {n}: {t*1e3:.2f} ms/batch, {n/t:,.0f} rows/s")
    # predict() caches predictions per DMatrix, so build a fresh one each
    # time; this figure includes DMatrix construction.
    t = median_time(lambda: b.predict(xgb.DMatrix(rows, nthread=1)), reps=10)
    print(f"xgboost {xgb.__version__} predict(new DMatrix) batch {n}: {t*1e3:.2f} ms/batch, {n/t:,.0f} rows/s")
    one = rows[:1].copy()
    for _ in range(100):
        b.inplace_predict(one)
    t = median_time(lambda: b.inplace_predict(one), reps=2000)
    print(f"xgboost {xgb.__version__} inplace_predict single row: {t*1e6:.1f} us/row, {1/t:,.0f} rows/s")


if __name__ == "__main__":
    main()
