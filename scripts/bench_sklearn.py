#!/usr/bin/python3
"""scikit-learn's own predict on the Go benchmark's model and rows.

It loads the estimator that scripts/make_sklearn_fixtures.py --bench
fitted (testdata/bench500.joblib, not committed: run that first, about 3
minutes; the committed bench500.json it rewrites comes out the same) and
the 1000 rows of testdata/bench_rows.f32, checks that its probabilities
are the committed bench500.expect.json (so it is the model the Go
benchmark loads), and reports the median of
several runs of predict_proba on one thread (HistGradientBoosting predicts
with OpenMP threads: OMP_NUM_THREADS=1 is set before scikit-learn loads;
the estimator has no n_jobs):
  - batch: predict_proba on all 1000 rows at once (rows/s)
  - single row: predict_proba on one row (latency, rows/s)

  taskset -c 1 /usr/bin/python3 scripts/bench_sklearn.py
"""
import os

os.environ["OMP_NUM_THREADS"] = "1"

import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import joblib  # noqa: E402
import numpy as np  # noqa: E402
import sklearn  # noqa: E402

TD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                  "internal", "runtime", "sklearn", "testdata")


def median_time(fn, reps, runs=7):
    ts = []
    for _ in range(runs):
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        ts.append((time.perf_counter() - t0) / reps)
    return statistics.median(ts)


def main():
    m = joblib.load(os.path.join(TD, "bench500.joblib"))
    nf = m.n_features_in_
    rows = np.fromfile(os.path.join(TD, "bench_rows.f32"), dtype="<f4").reshape(-1, nf).astype(np.float64)
    n = len(rows)
    with open(os.path.join(TD, "bench500.expect.json")) as f:
        want = np.array(json.load(f)["probability"])
    got = m.predict_proba(rows)[:, 1]
    if not np.allclose(got, want, rtol=0, atol=1e-12):
        raise SystemExit("bench500.joblib is not the model of bench500.json: run scripts/make_sklearn_fixtures.py --bench")
    for _ in range(3):
        m.predict_proba(rows)
    t = median_time(lambda: m.predict_proba(rows), reps=5)
    print(f"scikit-learn {sklearn.__version__} {type(m).__name__}.predict_proba batch {n}: {t*1e3:.2f} ms/batch, {n/t:,.0f} rows/s")
    one = rows[:1].copy()
    for _ in range(20):
        m.predict_proba(one)
    t = median_time(lambda: m.predict_proba(one), reps=200)
    print(f"scikit-learn {sklearn.__version__} {type(m).__name__}.predict_proba single row: {t*1e6:.1f} us/row, {1/t:,.0f} rows/s")


if __name__ == "__main__":
    main()
