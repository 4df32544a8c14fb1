#!/usr/bin/env python3
"""Writes cmd/sluice/testdata/fieldorder/credit.json: an XGBoost classifier
trained on a pandas DataFrame whose columns are age, income and tenure, so
the artifact carries learner.feature_names = [age, income, tenure]. The e2e
tests make a package of it with `sluice init`, swap two fields and expect
check, push and load to refuse it (the schema's field order against the
artifact's names). Also writes credit.expect.json: rows and XGBoost's own
predictions, so a test can tell a correct order from a swapped one.

Run with Debian's python3-xgboost and python3-pandas:
    /usr/bin/python3 scripts/make_fieldorder_fixture.py
"""
import json
import os

import numpy as np
import pandas as pd
import xgboost as xgb

OUT = os.path.join(os.path.dirname(__file__), "..", "cmd", "sluice", "testdata", "fieldorder")


def main():
    rng = np.random.default_rng(24)
    n = 400
    age = rng.uniform(18, 80, n).round(0)
    income = rng.uniform(10, 200, n).round(1)  # thousands
    tenure = rng.uniform(0, 30, n).round(0)
    y = ((income / 40 + age / 30 - tenure / 20 + rng.normal(0, 0.5, n)) > 4).astype(int)
    X = pd.DataFrame({"age": age, "income": income, "tenure": tenure})
    d = xgb.DMatrix(X, label=y)
    b = xgb.train({"objective": "binary:logistic", "max_depth": 3, "eta": 0.3, "nthread": 1, "seed": 1}, d, num_boost_round=8)
    os.makedirs(OUT, exist_ok=True)
    b.save_model(os.path.join(OUT, "credit.json"))
    rows = [{"age": 30.0, "income": 150.0, "tenure": 2.0}, {"age": 65.0, "income": 40.0, "tenure": 20.0}, {"age": 45.0, "income": 90.0, "tenure": 5.0}]
    pred = b.predict(xgb.DMatrix(pd.DataFrame(rows)))
    with open(os.path.join(OUT, "credit.expect.json"), "w") as f:
        json.dump({"instances": rows, "probability": [float(p) for p in pred]}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
