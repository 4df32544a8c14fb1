#!/usr/bin/python3
"""Fit scikit-learn models, export them with sluice_export_sklearn.py and
write the fixtures of internal/runtime/sklearn/testdata (Debian's
python3-sklearn 1.2.1):

  NAME.json        the exported artifact (format sluice-sklearn, version 1)
  NAME.expect.json {"rows": [[...]], "outputs": [[...]]}: the estimator's
                   input rows (float32 values; null = missing) and
                   scikit-learn's outputs for them, in the artifact's
                   output order (predict, then predict_proba or
                   decision_function)

and, for the pipelines (an e2e test pushes them through the binary):

  NAME.joblib      the fitted pipeline (for `sluice export-sklearn`)
  NAME.csv         rows of its training frame (for --rows)
  NAME.pipeline.json {"instances": [...], "outputs": [[...]]}: the
                   pipeline's own predict/predict_proba on raw instances
  cal_*.joblib, cal_*.csv, cal_*.json, cal_*.calibrated.json: binary
                   CalibratedClassifierCV models (sigmoid and isotonic;
                   the calibration as the last pipeline step or around a
                   whole prefit pipeline) with their exports, and the
                   calibrated model's own predict_proba[:, 1] and predict
                   on raw instances
  refuse_*.joblib  models the exporter refuses (KNeighborsClassifier, a
                   OneHotEncoder(drop="first"))

  bench500.json, bench500.joblib, bench_rows.f32, bench500.expect.json (--bench): a
  HistGradientBoostingClassifier of 500 trees of depth 6 on 30 features,
  the shape of the xgboost runtime's benchmark model, and 1000 rows.

  /usr/bin/python3 scripts/make_sklearn_fixtures.py [--bench]
"""
import json
import os
import sys

import joblib
import numpy as np
import pandas as pd
from sklearn import ensemble, linear_model, svm, tree
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, OrdinalEncoder, StandardScaler

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sluice_export_sklearn as exporter  # noqa: E402

OUT = os.path.join(HERE, "..", "internal", "runtime", "sklearn", "testdata")
SEED = 11


def f32(X):
    return np.asarray(X, dtype=np.float32).astype(np.float64)


def data(rng, n, d):
    X = f32(rng.normal(size=(n, d)))
    w = rng.normal(size=d)
    s = X @ w + np.sin(2 * X[:, 0]) * X[:, 1]
    return X, s


def with_thresholds(est, X, rng):
    """Rows whose values sit exactly on split thresholds (rounded to float32
    both ways), so the <= of every split is exercised."""
    trees = []
    if hasattr(est, "estimators_"):
        for e in np.ravel(est.estimators_):
            trees.append(e.tree_)
    elif hasattr(est, "tree_"):
        trees.append(est.tree_)
    extra = []
    for t in trees[:5]:
        for node in range(min(t.node_count, 20)):
            if t.children_left[node] == -1:
                continue
            row = X[rng.integers(len(X))].copy()
            th = t.threshold[node]
            down = np.float32(th)
            if float(down) > th:
                down = np.nextafter(down, np.float32(-np.inf))
            up = np.nextafter(down, np.float32(np.inf))
            for v in (down, up):
                r = row.copy()
                r[t.feature[node]] = float(v)
                extra.append(r)
    if extra:
        return np.vstack([X, np.array(extra)])
    return X


def write_json(name, obj):
    path = os.path.join(OUT, name)
    with open(path, "w") as f:
        json.dump(obj, f, separators=(",", ":"), allow_nan=False)
        f.write("\n")
    return path


def rows_json(X):
    return [[None if np.isnan(v) else float(np.float32(v)) for v in r] for r in X]


def fixture(name, est, X):
    """Export est (fitted) and write its expected outputs on rows X (the
    estimator's input, float32 values)."""
    doc = exporter.export(est, None, 1)
    X = f32(X)
    out = exporter.sklearn_outputs(est, doc, X)
    write_json(name + ".json", doc)
    write_json(name + ".expect.json", {"rows": rows_json(X), "outputs": out.tolist()})
    print(f"{name}: {doc['estimator']}, {len(doc.get('trees', []))} trees, {X.shape[0]} rows, outputs {doc['outputs']}", file=sys.stderr)


def trees(rng):
    X, s = data(rng, 600, 6)
    y3 = np.digitize(s, np.quantile(s, [0.33, 0.66]))
    y2 = (s > 0).astype(int)
    yr = s + rng.normal(scale=0.1, size=len(s))
    T, _ = data(np.random.default_rng(SEED + 100), 60, 6)

    m = ensemble.RandomForestClassifier(n_estimators=12, max_depth=7, random_state=0).fit(X, y3)
    fixture("rf_clf", m, with_thresholds(m, T, rng))
    m = ensemble.RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0).fit(X, np.where(y2 == 1, "yes", "no"))
    fixture("rf_clf_str", m, with_thresholds(m, T, rng))
    m = ensemble.RandomForestRegressor(n_estimators=10, max_depth=7, random_state=0).fit(X, yr)
    fixture("rf_reg", m, with_thresholds(m, T, rng))
    m = ensemble.ExtraTreesClassifier(n_estimators=10, max_depth=6, random_state=0).fit(X, y2)
    fixture("et_clf", m, with_thresholds(m, T, rng))
    m = ensemble.ExtraTreesRegressor(n_estimators=10, max_depth=6, random_state=0).fit(X, np.column_stack([yr, -2 * yr + 1]))
    fixture("et_reg2", m, with_thresholds(m, T, rng))
    m = tree.DecisionTreeClassifier(max_depth=8, random_state=0).fit(X, y3 + 1)
    fixture("dt_clf", m, with_thresholds(m, T, rng))
    m = tree.DecisionTreeRegressor(max_depth=8, random_state=0).fit(X, yr)
    fixture("dt_reg", m, with_thresholds(m, T, rng))

    m = ensemble.GradientBoostingClassifier(n_estimators=25, max_depth=3, learning_rate=0.2, random_state=0).fit(X, y2)
    fixture("gb_clf", m, with_thresholds(m, T, rng))
    m = ensemble.GradientBoostingClassifier(n_estimators=15, max_depth=3, random_state=0).fit(X, y3)
    fixture("gb_clf3", m, with_thresholds(m, T, rng))
    m = ensemble.GradientBoostingClassifier(loss="exponential", n_estimators=15, max_depth=2, random_state=0).fit(X, y2)
    fixture("gb_exp", m, with_thresholds(m, T, rng))
    m = ensemble.GradientBoostingRegressor(n_estimators=30, max_depth=3, subsample=0.8, random_state=0).fit(X, yr)
    fixture("gb_reg", m, with_thresholds(m, T, rng))
    m = ensemble.GradientBoostingRegressor(loss="huber", n_estimators=15, max_depth=3, random_state=0).fit(X, yr)
    fixture("gb_huber", m, with_thresholds(m, T, rng))
    m = ensemble.GradientBoostingRegressor(loss="quantile", alpha=0.8, n_estimators=15, max_depth=3, random_state=0).fit(X, yr)
    fixture("gb_quantile", m, with_thresholds(m, T, rng))
    m = ensemble.GradientBoostingRegressor(init="zero", n_estimators=10, max_depth=2, random_state=0).fit(X, yr)
    fixture("gb_zero", m, with_thresholds(m, T, rng))


def hgb(rng):
    n, d = 1500, 6
    X, s = data(rng, n, d)
    # Two categorical features (codes), as an OrdinalEncoder gives them.
    c1 = rng.integers(0, 5, size=n)
    c2 = rng.integers(0, 12, size=n)
    s = s + np.array([-1.5, 0.5, 1.0, -0.5, 2.0])[c1] + np.sin(c2)
    Xc = np.column_stack([X, c1, c2]).astype(np.float64)
    Xc[rng.random(Xc.shape) < 0.08] = np.nan
    y2 = (s > 0).astype(int)
    y3 = np.digitize(s, np.quantile(s, [0.33, 0.66]))
    yr = s + rng.normal(scale=0.1, size=n)
    T, _ = data(np.random.default_rng(SEED + 200), 80, d)
    tc1 = np.random.default_rng(3).integers(-1, 7, size=80)  # -1 and 5, 6: unknown
    tc2 = np.random.default_rng(4).integers(0, 14, size=80)
    Tc = np.column_stack([T, tc1, tc2]).astype(np.float64)
    Tc[np.random.default_rng(5).random(Tc.shape) < 0.1] = np.nan
    cat = [d, d + 1]

    m = ensemble.HistGradientBoostingClassifier(max_iter=30, categorical_features=cat, random_state=0).fit(Xc, y2)
    fixture("hgb_clf", m, Tc)
    m = ensemble.HistGradientBoostingClassifier(max_iter=15, max_depth=4, categorical_features=cat, random_state=0).fit(Xc, y3)
    fixture("hgb_clf3", m, Tc)
    m = ensemble.HistGradientBoostingRegressor(max_iter=30, categorical_features=cat, random_state=0).fit(Xc, yr)
    fixture("hgb_reg", m, Tc)
    m = ensemble.HistGradientBoostingRegressor(loss="poisson", max_iter=20, random_state=0).fit(Xc[:, :d], np.exp(yr / 4))
    fixture("hgb_poisson", m, Tc[:, :d])
    m = ensemble.HistGradientBoostingRegressor(loss="absolute_error", max_iter=20, random_state=0).fit(Xc[:, :d], yr)
    fixture("hgb_abs", m, Tc[:, :d])


def linear(rng):
    X, s = data(rng, 500, 5)
    y2 = (s > 0).astype(int)
    y3 = np.digitize(s, np.quantile(s, [0.33, 0.66]))
    yr = s + rng.normal(scale=0.1, size=len(s))
    T, _ = data(np.random.default_rng(SEED + 300), 50, 5)
    fixture("logreg", linear_model.LogisticRegression().fit(X, y2), T)
    fixture("logreg3", linear_model.LogisticRegression(max_iter=500).fit(X, y3), T)
    fixture("logreg_ovr", linear_model.LogisticRegression(solver="liblinear").fit(X, np.array(["a", "b", "c"])[y3]), T)
    fixture("logreg_mn2", linear_model.LogisticRegression(multi_class="multinomial").fit(X, y2), T)
    fixture("linreg", linear_model.LinearRegression().fit(X, yr), T)
    fixture("ridge2", linear_model.Ridge(alpha=0.5).fit(X, np.column_stack([yr, 3 * yr - 1])), T)
    fixture("lasso", linear_model.Lasso(alpha=0.05).fit(X, yr), T)
    fixture("enet", linear_model.ElasticNet(alpha=0.05, l1_ratio=0.3).fit(X, yr), T)
    fixture("svc", svm.LinearSVC(dual=True, max_iter=5000, random_state=0).fit(X, y2), T)
    fixture("svc3", svm.LinearSVC(dual=True, max_iter=5000, random_state=0).fit(X, y3), T)


def frame(rng, n):
    colors = np.array(["red", "green", "blue", "gray"])
    cities = np.array(["Austin", "Berlin", "Cairo", "Delhi", "Lima"])
    df = pd.DataFrame({
        "age": rng.integers(18, 80, size=n),
        "income": f32(rng.lognormal(10, 0.5, size=n)).round(2),
        "color": colors[rng.integers(0, 4, size=n)],
        "city": cities[rng.integers(0, 5, size=n)],
        "score": f32(rng.normal(size=n)),
        "visits": rng.integers(0, 30, size=n),
    })
    s = (df.age - 45) / 15 + np.log(df.income) - 10 + (df.color == "red") * 1.2 - (df.city == "Cairo") * 0.8 + df.score
    return df, s.to_numpy()


def pipelines(rng):
    df, s = frame(rng, 800)
    y = (s + rng.normal(scale=0.3, size=len(s)) > 0).astype(int)
    yr = s
    test, _ = frame(np.random.default_rng(SEED + 400), 40)
    num, cat = ["age", "income", "score"], ["color", "city"]

    tree_pipe = Pipeline([
        ("prep", ColumnTransformer([("num", StandardScaler(), num), ("cat", OneHotEncoder(), cat)])),
        ("model", ensemble.GradientBoostingClassifier(n_estimators=30, max_depth=3, random_state=0)),
    ]).fit(df, y)
    pipeline_fixture("pipe_tree", tree_pipe, df, test)

    lin_df = df.copy()
    lin_df.loc[rng.random(len(df)) < 0.1, "income"] = np.nan
    lin_pipe = Pipeline([
        ("prep", ColumnTransformer([
            ("num", Pipeline([("impute", SimpleImputer(strategy="median")), ("scale", StandardScaler())]), ["age", "income"]),
            ("mm", MinMaxScaler(), ["score"]),
            ("cat", OneHotEncoder(handle_unknown="ignore"), cat),
        ], remainder="drop")),
        ("model", linear_model.LogisticRegression(max_iter=1000)),
    ]).fit(lin_df, y)
    pipeline_fixture("pipe_linear", lin_pipe, lin_df, test)

    hgb_pipe = Pipeline([
        ("prep", ColumnTransformer([
            ("cat", OrdinalEncoder(), cat),
        ], remainder="passthrough")),
        ("model", ensemble.HistGradientBoostingRegressor(max_iter=40, categorical_features=[0, 1], random_state=0)),
    ]).fit(df, yr)
    pipeline_fixture("pipe_hgb", hgb_pipe, df, test)

    rf_pipe = Pipeline([
        ("prep", ColumnTransformer([("num", MinMaxScaler(), num), ("cat", OneHotEncoder(), cat)], remainder="passthrough")),
        ("model", ensemble.RandomForestClassifier(n_estimators=10, max_depth=6, random_state=0)),
    ]).fit(df, y)
    pipeline_fixture("pipe_rf", rf_pipe, df, test)


def pipeline_fixture(name, pipe, train, test):
    doc = exporter.export(pipe, train, 8)
    pre = pipe[:-1].transform(test)
    if hasattr(pre, "toarray"):
        pre = pre.toarray()
    pre = f32(pre)
    est = pipe[-1]
    write_json(name + ".json", doc)
    write_json(name + ".expect.json", {"rows": rows_json(pre), "outputs": exporter.sklearn_outputs(est, doc, pre).tolist()})
    joblib.dump(pipe, os.path.join(OUT, name + ".joblib"))
    train.head(50).to_csv(os.path.join(OUT, name + ".csv"), index=False)
    out = exporter.sklearn_outputs(pipe, doc, test)
    insts = []
    for r in range(len(test)):
        inst = {}
        for f in doc["input"]["fields"]:
            v = exporter.as_py(test[f.get("source", f["name"])].iloc[r])
            if exporter.is_nan(v):
                continue
            inst[f["name"]] = v if f["type"] != "float" else float(v)
        insts.append(inst)
    write_json(name + ".pipeline.json", {"instances": insts, "outputs": out.tolist()})
    print(f"{name}: {doc['estimator']}, fields {[f['name'] for f in doc['input']['fields']]}, outputs {doc['outputs']}", file=sys.stderr)


def refusals(rng):
    """Fitted models the exporter refuses (an e2e test checks the messages)."""
    from sklearn.neighbors import KNeighborsClassifier

    df, s = frame(rng, 100)
    y = (s > 0).astype(int)
    joblib.dump(KNeighborsClassifier().fit(df[["age", "income"]], y), os.path.join(OUT, "refuse_knn.joblib"))
    drop = Pipeline([
        ("prep", ColumnTransformer([("cat", OneHotEncoder(drop="first"), ["color"])], remainder="passthrough")),
        ("model", linear_model.LogisticRegression()),
    ]).fit(df[["color", "age"]], y)
    joblib.dump(drop, os.path.join(OUT, "refuse_drop.joblib"))


def bench():
    nf = 30
    rng = np.random.default_rng(7)

    def rows(r, n):
        X = r.normal(size=(n, nf)).astype(np.float32)
        X[r.random((n, nf)) < 0.05] = np.nan
        return X

    X = rows(rng, 50000)
    Z = np.nan_to_num(X)
    w = rng.normal(size=nf)
    s = Z @ w * 0.3 + np.sin(2 * Z[:, 0]) * Z[:, 1] + (Z[:, 2] > 0.5) * Z[:, 3] ** 2
    y = (s + rng.normal(scale=1.0, size=len(s)) > 0).astype(int)
    m = ensemble.HistGradientBoostingClassifier(max_iter=500, max_depth=6, max_leaf_nodes=None, learning_rate=0.05,
                                                early_stopping=False, random_state=1).fit(X.astype(np.float64), y)
    doc = exporter.export(m, None, 1)
    write_json("bench500.json", doc)
    joblib.dump(m, os.path.join(OUT, "bench500.joblib"))
    R = rows(np.random.default_rng(8), 1000)
    R.astype("<f4").tofile(os.path.join(OUT, "bench_rows.f32"))
    proba = m.predict_proba(R.astype(np.float64))[:, 1]
    write_json("bench500.expect.json", {"probability": proba.tolist()})
    print(f"bench500: {len(doc['trees'])} trees, {os.path.getsize(os.path.join(OUT, 'bench500.json'))} bytes", file=sys.stderr)


def calibrated():
    """CalibratedClassifierCV models (their own generator: the fixtures
    above do not move when these change)."""
    from sklearn.calibration import CalibratedClassifierCV

    rng = np.random.default_rng(SEED + 900)
    df, s = frame(rng, 800)
    y = (s + rng.normal(scale=0.6, size=len(s)) > 0).astype(int)
    test, _ = frame(np.random.default_rng(SEED + 901), 40)
    num, cat = ["age", "income", "score"], ["color", "city"]

    yes_no = np.where(y == 1, "yes", "no")
    sig = Pipeline([
        ("prep", ColumnTransformer([("num", StandardScaler(), num), ("cat", OneHotEncoder(), cat)])),
        ("model", CalibratedClassifierCV(linear_model.LogisticRegression(max_iter=1000), method="sigmoid", cv=3, ensemble=False)),
    ]).fit(df, yes_no)
    calibrated_fixture("cal_sigmoid_lr", sig, df, test)

    rf = Pipeline([
        ("prep", ColumnTransformer([("num", MinMaxScaler(), num), ("cat", OneHotEncoder(), cat)], remainder="passthrough")),
        ("model", ensemble.RandomForestClassifier(n_estimators=10, max_depth=6, random_state=0)),
    ]).fit(df.iloc[:500], y[:500])
    iso_rf = CalibratedClassifierCV(rf, method="isotonic", cv="prefit").fit(df.iloc[500:], y[500:])
    calibrated_fixture("cal_isotonic_rf", iso_rf, df, test)

    iso_hgb = Pipeline([
        ("prep", ColumnTransformer([("cat", OrdinalEncoder(), cat)], remainder="passthrough")),
        ("model", CalibratedClassifierCV(ensemble.HistGradientBoostingClassifier(max_iter=30, categorical_features=[0, 1], random_state=0),
                                         method="isotonic", cv=3, ensemble=False)),
    ]).fit(df, y)
    calibrated_fixture("cal_isotonic_hgb", iso_hgb, df, test)

    ens = CalibratedClassifierCV(linear_model.LogisticRegression(), cv=3).fit(df[["age", "score"]], y)
    joblib.dump(ens, os.path.join(OUT, "refuse_calibrated_ensemble.joblib"))


def calibrated_fixture(name, model, train, test):
    doc = exporter.export(model, train, 8)
    write_json(name + ".json", doc)
    joblib.dump(model, os.path.join(OUT, name + ".joblib"))
    train.head(50).to_csv(os.path.join(OUT, name + ".csv"), index=False)
    p = model.predict_proba(test)[:, 1]
    label = model.predict(test)
    insts = []
    for r in range(len(test)):
        inst = {}
        for f in doc["input"]["fields"]:
            v = exporter.as_py(test[f.get("source", f["name"])].iloc[r])
            inst[f["name"]] = v if f["type"] != "float" else float(v)
        insts.append(inst)
    write_json(name + ".calibrated.json", {"instances": insts, "probability": [float(v) for v in p],
                                           "calibratedLabel": [str(exporter.as_py(v)) for v in label]})
    print(f"{name}: {doc['estimator']}, outputs {doc['outputs']}, postprocess {[st['op'] + ':' + st.get('method', '') for st in doc['postprocess']]}", file=sys.stderr)


def main():
    os.makedirs(OUT, exist_ok=True)
    if "--bench" in sys.argv:
        bench()
        return
    rng = np.random.default_rng(SEED)
    trees(rng)
    hgb(rng)
    linear(rng)
    pipelines(rng)
    refusals(rng)
    calibrated()


if __name__ == "__main__":
    main()
