#!/usr/bin/python3
"""Train small real XGBoost models and record XGBoost's own predictions.

Writes into internal/runtime/xgboost/testdata/:
  rows.json           test rows (float32 bit patterns, NaN included)
  <case>.json         the model as saved by Booster.save_model (JSON)
  <case>.ubj          a UBJSON copy, for some cases
  <case>.expect.json  xgboost's predict(output_margin=True) and predict(),
                      as float32 bit patterns, so Go can compare exactly
  cat_rows.json       rows for the categorical models: category codes as
                      floats (out-of-range, negative and fractional codes
                      and missing values included), with the frame's
                      category names
  cat_*.{json,ubj}    models trained on a pandas frame with category dtype
                      (enable_categorical=True): partition and one-hot splits
  dart_*, rank_*, survival_*, reg_*, binary_hinge, multi_target_*: the
                      other boosters and objectives people train
  cat_v31.json        cat_binary with the categories' names where XGBoost
                      3.1 and later keep them (for sluice init)
  vector_base_score_*, quantile_*: the 2.x/3.x forms (a base_score per
                      target, reg:quantileerror) this XGBoost cannot write,
                      made from a real multi-target model by changing its
                      JSON; their expectations are this XGBoost's own
                      arithmetic on the same trees (base_margin per target)

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
    ("binary_logitraw", {"objective": "binary:logitraw", "max_depth": 3, "base_score": 0.3}, 12, "binary", True),
    ("reg_squarederror", {"objective": "reg:squarederror", "max_depth": 4, "base_score": 1.5}, 15, "reg", True),
    ("reg_logistic", {"objective": "reg:logistic", "max_depth": 3, "base_score": 0.37}, 12, "prob", True),
    ("count_poisson", {"objective": "count:poisson", "max_depth": 3, "base_score": 2.5}, 12, "count", True),
    ("multi_softprob", {"objective": "multi:softprob", "num_class": 3, "max_depth": 3}, 8, "class3", True),
    ("multi_softmax", {"objective": "multi:softmax", "num_class": 4, "max_depth": 2}, 6, "class4", True),
    # a random-forest-style model: several parallel trees per round
    ("parallel_trees", {"objective": "binary:logistic", "max_depth": 3, "num_parallel_tree": 3,
                        "subsample": 0.8, "colsample_bynode": 0.8}, 4, "binary", True),
    # exact + pruning, which can leave deleted nodes in the arrays
    ("pruned_exact", {"objective": "reg:squarederror", "tree_method": "exact", "max_depth": 6,
                      "gamma": 40.0}, 6, "reg", True),
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
    """Real models the runtime must refuse: gblinear. (The dart and
    categorical models that were here are served now; the random draws
    they took are kept so the fixtures after them do not change.)"""
    X = make_data(rng, 300)
    y = (np.nan_to_num(X[:, 0]) > 0).astype(np.float32)
    out = []
    for name, params in [
        ("unsupported_dart", {"booster": "dart", "objective": "binary:logistic", "max_depth": 2}),
        ("unsupported_gblinear", {"booster": "gblinear", "objective": "binary:logistic"}),
    ]:
        b = xgb.train(dict(params, seed=1, nthread=1), xgb.DMatrix(X, label=y), 2)
        if name == "unsupported_gblinear":
            b.save_model(os.path.join(OUT, name + ".json"))
            out.append(name + ".json")
    rng.integers(0, 4, size=(300, 2))
    return out


# The cases added with issue 24: every other objective and booster people
# train. They draw from their own generator, so the cases above keep their
# bytes. Label kinds as in labels(), plus: "pos" (positive), "nonneg"
# (zeros and positives), "rank" (relevance 0..3 in query groups of 20),
# "rank01" (relevant or not, in groups), "cox" (survival times, negative =
# censored), "aft" (interval-censored bounds), "multi3" (three targets),
# "multilabel" (three 0/1 labels).
MORE_CASES = [
    ("reg_absoluteerror", {"objective": "reg:absoluteerror", "max_depth": 3}, 10, "reg", True),
    ("reg_pseudohubererror", {"objective": "reg:pseudohubererror", "max_depth": 3, "huber_slope": 1.5,
                              "base_score": 1.0}, 10, "reg", True),
    ("reg_squaredlogerror", {"objective": "reg:squaredlogerror", "max_depth": 3, "base_score": 2.0}, 10, "pos", True),
    ("reg_tweedie", {"objective": "reg:tweedie", "tweedie_variance_power": 1.4, "max_depth": 3}, 12, "nonneg", True),
    ("reg_gamma", {"objective": "reg:gamma", "max_depth": 3, "base_score": 3.0}, 12, "pos", True),
    ("binary_hinge", {"objective": "binary:hinge", "max_depth": 3}, 10, "binary", True),
    ("rank_pairwise", {"objective": "rank:pairwise", "max_depth": 3}, 10, "rank", True),
    ("rank_ndcg", {"objective": "rank:ndcg", "max_depth": 3}, 10, "rank", True),
    ("rank_map", {"objective": "rank:map", "max_depth": 3}, 10, "rank01", True),
    ("survival_cox", {"objective": "survival:cox", "max_depth": 3}, 10, "cox", True),
    ("survival_aft", {"objective": "survival:aft", "aft_loss_distribution": "logistic",
                      "aft_loss_distribution_scale": 1.2, "max_depth": 3}, 10, "aft", True),
    ("multi_target", {"objective": "reg:squarederror", "max_depth": 3, "base_score": 0.7}, 6, "multi3", True),
    # multi-label classification: three 0/1 labels, a probability each
    ("multi_label", {"objective": "binary:logistic", "max_depth": 3}, 6, "multilabel", True),
    # dart: dropout in training; inference uses every tree, each scaled by
    # its weight_drop
    ("dart_binary", {"booster": "dart", "objective": "binary:logistic", "max_depth": 3, "rate_drop": 0.3,
                     "skip_drop": 0.0}, 12, "binary", True),
    ("dart_softprob", {"booster": "dart", "objective": "multi:softprob", "num_class": 3, "max_depth": 2,
                       "rate_drop": 0.25, "sample_type": "weighted", "normalize_type": "forest"}, 8, "class3", True),
    ("dart_reg", {"booster": "dart", "objective": "reg:squarederror", "max_depth": 3, "rate_drop": 0.2,
                  "one_drop": 1, "base_score": 1.5}, 10, "reg", True),
]


def more_dmatrix(kind, X, rng):
    """A training DMatrix for the MORE_CASES label kinds."""
    s = signal(X)
    n = len(X)
    if kind in ("reg", "binary", "class3"):
        return xgb.DMatrix(X, label=labels(kind, X, rng), missing=np.nan)
    if kind == "pos":
        return xgb.DMatrix(X, label=np.exp(0.3 * s + rng.normal(scale=0.2, size=n)).astype(np.float32))
    if kind == "nonneg":
        y = rng.poisson(np.exp(0.4 * s)) * rng.gamma(2.0, 1.0, size=n)
        return xgb.DMatrix(X, label=y.astype(np.float32))
    if kind in ("rank", "rank01"):
        rel = np.digitize(s + rng.normal(scale=0.5, size=n), [-1, 0, 1])
        if kind == "rank01":
            rel = (rel >= 2).astype(int)
        d = xgb.DMatrix(X, label=rel.astype(np.float32))
        d.set_group([20] * (n // 20))
        return d
    if kind == "cox":
        t = rng.exponential(np.exp(-0.5 * s)) + 0.01
        censored = rng.random(n) < 0.3
        return xgb.DMatrix(X, label=np.where(censored, -t, t).astype(np.float32))
    if kind == "aft":
        t = np.exp(0.5 * s + rng.normal(scale=0.3, size=n))
        lo, hi = t.copy(), t.copy()
        right = rng.random(n) < 0.25
        hi[right] = np.inf
        d = xgb.DMatrix(X)
        d.set_float_info("label_lower_bound", lo.astype(np.float32))
        d.set_float_info("label_upper_bound", hi.astype(np.float32))
        return d
    if kind == "multi3":
        Z = np.nan_to_num(X, nan=0.0)
        Y = np.stack([s, Z[:, 1] * 2 - Z[:, 4], np.abs(Z[:, 6]) + 0.5 * Z[:, 3]], 1)
        return xgb.DMatrix(X, label=(Y + rng.normal(scale=0.2, size=Y.shape)).astype(np.float32))
    if kind == "multilabel":
        Z = np.nan_to_num(X, nan=0.0)
        Y = np.stack([s > 0, Z[:, 1] + Z[:, 4] > 0, Z[:, 3] >= 2], 1)
        return xgb.DMatrix(X, label=Y.astype(np.float32))
    raise ValueError(kind)


def predict_expect(b, d, n, name, objective):
    margin = b.predict(d, output_margin=True).astype(np.float32).reshape(n, -1)
    pred = b.predict(d).astype(np.float32).reshape(n, -1)
    return {"model": name, "objective": objective, "xgboost": xgb.__version__,
            "margin": [bits(r) for r in margin], "pred": [bits(r) for r in pred]}


def write_json(name, obj):
    with open(os.path.join(OUT, name), "w") as f:
        json.dump(obj, f, separators=(",", ":"))


def more_cases(Xte):
    rng = np.random.default_rng(SEED + 24)
    Xtr = make_data(rng, N_TRAIN)
    written = []
    for name, params, rounds, kind, ubj in MORE_CASES:
        p = dict(params, seed=1, nthread=1)
        p.setdefault("tree_method", "hist")
        b = xgb.train(p, more_dmatrix(kind, Xtr, rng), rounds)
        path = os.path.join(OUT, name + ".json")
        b.save_model(path)
        written.append(name + ".json")
        if ubj:
            b.save_model(os.path.join(OUT, name + ".ubj"))
            written.append(name + ".ubj")
        lb = xgb.Booster(model_file=path)
        lb.set_param({"nthread": 1})
        write_json(name + ".expect.json", predict_expect(lb, xgb.DMatrix(Xte, missing=np.nan), len(Xte), name,
                                                         params["objective"]))
        written.append(name + ".expect.json")
        if name == "multi_target":
            written += later_forms(lb, path, Xte)
    return written


def later_forms(b, path, Xte):
    """The 2.x/3.x forms XGBoost 1.7 cannot write, from the real
    multi-target model: a vector base_score (3.1+: one per target) and
    reg:quantileerror with three quantiles (2.0+; predict sorts each row's
    quantiles from 3.4 on). Expectations: this XGBoost's own predict of the
    same trees with base_margin set to the per-target base scores, which is
    exactly what a vector base_score means for an identity objective."""
    with open(path) as f:
        model = json.load(f)
    n = len(Xte)
    base = [np.float32(0.25), np.float32(-1.5), np.float32(2.0)]
    out = []
    for name, objective, version, sort in [
        ("vector_base_score", {"name": "reg:squarederror", "reg_loss_param": {"scale_pos_weight": "1"}},
         [3, 1, 0], False),
        ("quantile_v2", {"name": "reg:quantileerror",
                         "quantile_loss_param": {"quantile_alpha": "[1E-1,5E-1,9E-1]"}}, [2, 1, 4], False),
        ("quantile_v34", {"name": "reg:quantileerror",
                          "quantile_loss_param": {"quantile_alpha": "[1E-1,5E-1,9E-1]"}}, [3, 4, 0], True),
    ]:
        m = json.loads(json.dumps(model))
        m["version"] = version
        m["learner"]["objective"] = objective
        m["learner"]["learner_model_param"]["base_score"] = "[" + ",".join(repr(float(v)) for v in base) + "]"
        write_json(name + ".json", m)
        d = xgb.DMatrix(Xte, missing=np.nan)
        d.set_base_margin(np.tile(np.array(base, dtype=np.float32), (n, 1)))
        margin = b.predict(d, output_margin=True).astype(np.float32).reshape(n, -1)
        pred = np.sort(margin, axis=1) if sort else margin
        write_json(name + ".expect.json", {"model": name, "objective": objective["name"],
                                           "xgboost": xgb.__version__ + " (base_margin)",
                                           "margin": [bits(r) for r in margin], "pred": [bits(r) for r in pred]})
        out += [name + ".json", name + ".expect.json"]
    return out


# Categorical models: trained the way people do it, on a pandas frame whose
# columns have category dtype, with enable_categorical=True. XGBoost reads
# a category column as its codes (the index into .cat.categories; a missing
# value or unknown category is code -1, i.e. missing), so the Go runtime is
# fed the same codes as floats.
CAT_NAMES = ["color", "city", "amount", "visits"]
COLORS = ["blue", "gray", "green", "red", "white"]
CITIES = ["Austin", "Berlin", "Cairo", "Delhi", "Lima", "Lyon", "Oslo", "Paris", "Porto", "Quito", "Rome",
          "Seoul", "Tokyo", "Zurich"]
CAT_CASES = [
    # partition splits (a set of categories goes right)
    ("cat_binary", {"objective": "binary:logistic", "max_depth": 4, "max_cat_to_onehot": 1}, 12, "binary", True),
    # one-hot splits (one category against the rest)
    ("cat_onehot", {"objective": "reg:squarederror", "max_depth": 3, "max_cat_to_onehot": 32}, 10, "reg", True),
    ("cat_softprob", {"objective": "multi:softprob", "num_class": 3, "max_depth": 3}, 6, "class3", True),
    ("cat_dart", {"booster": "dart", "objective": "binary:logistic", "max_depth": 3, "rate_drop": 0.3,
                  "max_cat_to_onehot": 1}, 8, "binary", True),
]


def cat_frame(rng, n):
    import pandas as pd
    color = rng.choice(COLORS, size=n, p=[0.3, 0.1, 0.25, 0.25, 0.1]).astype(object)
    city = rng.choice(CITIES, size=n).astype(object)
    color[rng.random(n) < 0.08] = None
    city[rng.random(n) < 0.05] = None
    amount = np.exp(rng.normal(size=n)).astype(np.float32)
    amount[rng.random(n) < 0.1] = np.nan
    visits = rng.integers(0, 9, size=n).astype(np.float32)
    return pd.DataFrame({
        "color": pd.Categorical(color, categories=COLORS),
        "city": pd.Categorical(city, categories=CITIES),
        "amount": amount, "visits": visits})


def cat_signal(df):
    c = df["color"].cat.codes.to_numpy()
    t = df["city"].cat.codes.to_numpy()
    a = np.nan_to_num(df["amount"].to_numpy(dtype=np.float64), nan=1.0)
    return (1.0 * np.isin(c, [0, 3]) - 0.8 * (c == 4) + 0.9 * np.isin(t, [1, 4, 7, 11]) - 0.6 * np.isin(t, [2, 9])
            + 0.4 * np.log(a) + 0.1 * df["visits"].to_numpy() - 0.6)


def codes(df):
    """The frame as XGBoost reads it: codes as floats, -1 as missing."""
    X = np.empty((len(df), len(CAT_NAMES)), dtype=np.float32)
    for j, col in enumerate(CAT_NAMES):
        if str(df[col].dtype) == "category":
            c = df[col].cat.codes.to_numpy().astype(np.float32)
            c[c < 0] = np.nan
            X[:, j] = c
        else:
            X[:, j] = df[col].to_numpy(dtype=np.float32)
    return X


def cat_cases():
    import pandas as pd
    rng = np.random.default_rng(SEED + 2400)
    df = cat_frame(rng, N_TRAIN)
    s = cat_signal(df)
    test = cat_frame(rng, N_TEST)
    Xte = codes(test)
    # codes a frame cannot hold but a caller of the runtime can send: past
    # the last category, negative, fractional, huge; XGBoost sends all of
    # them left (not in any split's set), as the Go runtime must
    odd = []
    for i, v in enumerate([5, 13, 14, 40, -1, -0.5, 2.5, 3.99, 1e7, 16777215, 16777216, 3e9, 0.0, -0.0]):
        r = Xte[i].copy()
        r[0] = v if i % 2 == 0 else r[0]
        r[1] = v if i % 2 == 1 else r[1]
        odd.append(r)
    Xall = np.vstack([Xte, np.array(odd, dtype=np.float32)]).astype(np.float32)
    write_json("cat_rows.json", {"cols": len(CAT_NAMES), "names": CAT_NAMES, "categories": {"color": COLORS, "city": CITIES},
                                 "rows": [bits(r) for r in Xall]})
    written = ["cat_rows.json"]
    ft = ["c", "c", "float", "float"]
    for name, params, rounds, kind, ubj in CAT_CASES:
        n = len(df)
        if kind == "binary":
            y = (s + rng.normal(scale=0.4, size=n) > 0).astype(np.float32)
        elif kind == "reg":
            y = (s + rng.normal(scale=0.2, size=n)).astype(np.float32)
        else:
            y = np.digitize(s + rng.normal(scale=0.3, size=n), [-0.4, 0.6]).astype(np.float32)
        p = dict(params, seed=1, nthread=1, tree_method="hist")
        b = xgb.train(p, xgb.DMatrix(df, label=y, enable_categorical=True), rounds)
        path = os.path.join(OUT, name + ".json")
        b.save_model(path)
        written.append(name + ".json")
        if ubj:
            b.save_model(os.path.join(OUT, name + ".ubj"))
            written.append(name + ".ubj")
        lb = xgb.Booster(model_file=path)
        lb.set_param({"nthread": 1})
        d = xgb.DMatrix(Xall, missing=np.nan, feature_names=CAT_NAMES, feature_types=ft, enable_categorical=True)
        exp = predict_expect(lb, d, len(Xall), name, params["objective"])
        # the frame itself (names, not codes) predicts the same: the codes
        # are what XGBoost reads
        same = lb.predict(xgb.DMatrix(test, enable_categorical=True)).astype(np.float32).reshape(len(test), -1)
        assert (same.view(np.uint32) == np.array(exp["pred"][:len(test)], dtype=np.uint32)).all(), name
        # a few instances by name, for the end-to-end test through sluice
        inst = []
        for i in range(6):
            row = {}
            for col in CAT_NAMES:
                v = test[col].iloc[i]
                if pd.isna(v):
                    continue
                row[col] = v if isinstance(v, str) else float(v)
            inst.append(row)
        exp["instances"] = inst
        exp["instancePred"] = [bits(r) for r in same[:6]]
        write_json(name + ".expect.json", exp)
        written.append(name + ".expect.json")
    written.append(v31_cats())
    return written


def v31_cats():
    """cat_binary as XGBoost 3.1 and later save it: the same trees, and
    the frame's categories in gradient_booster.model.cats (cat_container.cc,
    CatContainer::Save: "enc" one entry per feature, string names as
    int32 offsets and int8 UTF-8 bytes, an empty numeric array for the other
    features). Only sluice init reads them; predictions are cat_binary's."""
    with open(os.path.join(OUT, "cat_binary.json")) as f:
        m = json.load(f)
    m["version"] = [3, 1, 0]
    enc, segs, sorted_idx = [], [0], []
    for col in CAT_NAMES:
        names = {"color": COLORS, "city": CITIES}.get(col)
        if names is None:
            enc.append({"type": 9, "values": []})
            segs.append(segs[-1])
            continue
        b = "".join(names).encode("utf-8")
        offsets = np.cumsum([0] + [len(n.encode("utf-8")) for n in names]).tolist()
        enc.append({"offsets": offsets, "values": [int(np.int8(np.uint8(x))) for x in b]})
        segs.append(segs[-1] + len(names))
        sorted_idx += np.argsort(names, kind="stable").tolist()
    m["learner"]["gradient_booster"]["model"]["cats"] = {"enc": enc, "feature_segments": segs, "sorted_idx": sorted_idx}
    write_json("cat_v31.json", m)
    return "cat_v31.json"


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
    written += more_cases(Xte)
    written += cat_cases()
    total = sum(os.path.getsize(os.path.join(OUT, w)) for w in written)
    print(f"xgboost {xgb.__version__}: wrote {len(written)} files, {total} bytes, into {OUT}", file=sys.stderr)


if __name__ == "__main__":
    main()
