#!/usr/bin/env python3
"""Writes cmd/sluice/testdata/dummies/plans.json: an XGBoost classifier
trained on pandas.get_dummies of a frame with a categorical column plan
(basic, pro, team) between two numeric ones, so the artifact's
learner.feature_names are [tenure, plan_basic, plan_pro, plan_team,
tickets]. `sluice init` turns the three dummy columns back into one
category field plan with an onehot step. Also writes plans.expect.json:
raw rows (plan as a string) and XGBoost's own predictions on them.

Run with Debian's python3-xgboost and python3-pandas:
    /usr/bin/python3 scripts/make_dummies_fixture.py
"""
import json
import os

import numpy as np
import pandas as pd
import xgboost as xgb

OUT = os.path.join(os.path.dirname(__file__), "..", "cmd", "sluice", "testdata", "dummies")


def main():
    rng = np.random.default_rng(24)
    n = 400
    tenure = rng.uniform(0, 60, n).round(0)
    plan = rng.choice(["basic", "pro", "team"], n)
    tickets = rng.integers(0, 10, n).astype(float)
    y = ((tickets / 3 - tenure / 20 + (plan == "basic") * 1.5 + rng.normal(0, 0.5, n)) > 0.5).astype(int)
    raw = pd.DataFrame({"tenure": tenure, "plan": plan, "tickets": tickets})
    X = pd.get_dummies(raw, columns=["plan"], dtype="uint8")
    X = X[["tenure", "plan_basic", "plan_pro", "plan_team", "tickets"]]
    model = xgb.XGBClassifier(n_estimators=20, max_depth=3, learning_rate=0.3, random_state=0)
    model.fit(X, y)
    os.makedirs(OUT, exist_ok=True)
    model.get_booster().save_model(os.path.join(OUT, "plans.json"))
    rows = [
        {"tenure": 3.0, "plan": "basic", "tickets": 7.0},
        {"tenure": 48.0, "plan": "pro", "tickets": 1.0},
        {"tenure": 12.0, "plan": "team", "tickets": 4.0},
    ]
    Xr = pd.get_dummies(pd.DataFrame(rows), columns=["plan"], dtype="uint8")
    for c in ["plan_basic", "plan_pro", "plan_team"]:
        if c not in Xr:
            Xr[c] = 0
    Xr = Xr[["tenure", "plan_basic", "plan_pro", "plan_team", "tickets"]].astype("uint8", errors="ignore")
    Xr = Xr.astype({"tenure": float, "tickets": float})
    p = model.get_booster().predict(xgb.DMatrix(Xr))
    with open(os.path.join(OUT, "plans.expect.json"), "w") as f:
        json.dump({"rows": rows, "probability": [float(v) for v in p]}, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
