#!/usr/bin/env python3
"""Export a fitted scikit-learn estimator or pipeline to Sluice's sklearn JSON.

Run it with your own Python and scikit-learn, on your own model file:

    python3 scripts/sluice_export_sklearn.py model.joblib --out DIR [--rows data.csv]

(`sluice export-sklearn` runs this script and then writes DIR/model.yaml.)

Loading a pickle (joblib files are pickles) runs whatever code the pickle
names: only load files you trust. That is why this script runs in your
Python and the Sluice server never loads a pickle: it serves the JSON this
script writes, which holds numbers and names only.

The format (formatVersion 1) is documented in docs/sklearn.md. What it holds:

- the final estimator: its trees (left, right, feature, threshold, value
  per node; missing-value directions and categorical bitsets where
  scikit-learn has them) or its coefficients, its classes, its loss;
- the pipeline in front of it (StandardScaler, MinMaxScaler, OneHotEncoder,
  OrdinalEncoder, SimpleImputer, ColumnTransformer, nested Pipelines) as
  Sluice input fields and preprocessing steps ("input"), and the names of
  the estimator's input columns in Sluice's feature-name form
  ("featureNames");
- a few example rows with scikit-learn's own outputs for them
  ("examples"), which become the package's golden examples.

Anything the format cannot express exactly is refused with a message that
names the step and what to change; nothing is approximated silently.
"""

import argparse
import json
import math
import os
import re
import sys

FORMAT = "sluice-sklearn"
FORMAT_VERSION = 1
MAX_EXAMPLES = 64


class ExportError(Exception):
    pass


# ---------------------------------------------------------------- names

_non_field = re.compile(r"[^A-Za-z0-9_]+")


def field_name(s, fallback):
    """A valid Sluice field name (as internal/scaffold.FieldName makes one)."""
    n = _non_field.sub("_", str(s)).strip("_")
    if not n:
        n = fallback
    if n[0].isdigit():
        n = "_" + n
    return n


def fmt_num(x):
    """A number as Go's strconv.FormatFloat(x, 'g', -1, 64) writes it in a feature name."""
    x = float(x)
    if x == int(x) and abs(x) < 1e21:
        return str(int(x))
    r = repr(x)
    return r


def as_py(v):
    """numpy scalar -> plain Python (JSON) value."""
    import numpy as np

    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if isinstance(v, np.str_):
        return str(v)
    return v


def is_nan(v):
    try:
        return v is None or (isinstance(v, float) and math.isnan(v)) or (hasattr(v, "dtype") and bool(v != v))
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------- columns

class Column:
    """One input column of the pipeline on its way to the estimator."""

    def __init__(self, source, name):
        self.source = source  # the column's name in the training frame
        self.name = name  # the Sluice field name
        self.type = None  # float, int, bool, category (None: numeric, decided from rows)
        self.values = None  # category: its values as strings, in code order
        self.cats = None  # category: the encoder's own categories (values as the frame holds them)
        self.default = None  # SimpleImputer's statistic
        self.optional = False  # an OrdinalEncoder with NaN among its categories
        self.steps = []  # Sluice preprocessing steps, in order
        self.onehot = False  # one-hot encoded: the field's last step
        self.feature = name  # Sluice's feature name so far

    def raw(self):
        return not self.steps and self.values is None

    def width(self):
        return len(self.values) if self.onehot else 1

    def feature_names(self):
        # The names Sluice's field-order check compares with the schema's
        # columns: the field, or field=level for a one-hot column.
        if self.onehot:
            return [self.name + "=" + v for v in self.values]
        return [self.name]

    def add_step(self, op, **params):
        if self.onehot:
            raise ExportError(f"column {self.source!r}: a step follows its one-hot encoding; Sluice's onehot must be a field's last step")
        st = {"op": op, "field": self.name}
        st.update(params)
        self.steps.append(st)
        if op == "onehot":
            self.onehot = True
        else:
            self.feature = f"{op}({self.feature})"


def _numeric(col, what):
    if col.onehot:
        raise ExportError(f"{what} on column {col.source!r} after one-hot encoding has no Sluice step")
    if col.values is not None and not any(s["op"] == "ordinal" for s in col.steps):
        raise ExportError(f"{what} on the category column {col.source!r}: encode it first")


def apply_transformer(t, cols, where):
    """Apply fitted transformer t to cols (a list of Column); returns the
    list of columns it outputs, in its output order."""
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import MinMaxScaler, OneHotEncoder, OrdinalEncoder, StandardScaler

    import numpy as np

    if isinstance(t, str):
        if t == "passthrough":
            return cols
        if t == "drop":
            return []
        raise ExportError(f"{where}: unknown transformer {t!r}")
    if t is None:
        return cols
    if isinstance(t, Pipeline):
        for name, step in t.steps:
            cols = apply_transformer(step, cols, f"{where}/{name}")
        return cols
    if isinstance(t, ColumnTransformer):
        return apply_column_transformer(t, cols, where)
    n_in = getattr(t, "n_features_in_", len(cols))
    if n_in != len(cols):
        raise ExportError(f"{where}: {type(t).__name__} was fitted on {n_in} columns, it receives {len(cols)} here")
    if isinstance(t, StandardScaler):
        for j, c in enumerate(cols):
            _numeric(c, "StandardScaler")
            mean = float(t.mean_[j]) if t.with_mean else 0.0
            std = float(t.scale_[j]) if t.with_std else 1.0
            if mean != 0.0 or std != 1.0:
                c.add_step("standardize", mean=mean, std=std)
        return cols
    if isinstance(t, MinMaxScaler):
        lo, hi = t.feature_range
        for j, c in enumerate(cols):
            _numeric(c, "MinMaxScaler")
            scale, mn = float(t.scale_[j]), float(t.min_[j])
            # x*scale + min written as (x - mean)/std, which is what
            # Sluice's standardize computes (equal to within 1 ulp).
            c.add_step("standardize", mean=-mn / scale, std=1.0 / scale)
            if t.clip:
                c.add_step("clip", min=float(lo), max=float(hi))
        return cols
    if isinstance(t, SimpleImputer):
        if t.add_indicator:
            raise ExportError(f"{where}: SimpleImputer(add_indicator=True) has no Sluice step; refit without the indicator columns")
        if not is_nan(t.missing_values):
            raise ExportError(f"{where}: SimpleImputer(missing_values={t.missing_values!r}): Sluice's missing value is an absent or null field; refit with missing_values=np.nan")
        stats = t.statistics_
        if len(stats) != len(cols) or any(is_nan(s) for s in stats):
            raise ExportError(f"{where}: SimpleImputer dropped a column it saw no value of (its statistic is NaN); drop that column before the imputer")
        for j, c in enumerate(cols):
            if not c.raw():
                raise ExportError(f"{where}: SimpleImputer on column {c.source!r} after another step; Sluice's default fills the raw field, so impute first")
            c.default = as_py(stats[j])
        return cols
    if isinstance(t, (OneHotEncoder, OrdinalEncoder)):
        kind = type(t).__name__
        if isinstance(t, OneHotEncoder):
            if t.drop_idx_ is not None and any(d is not None for d in np.atleast_1d(t.drop_idx_)):
                raise ExportError(f"{where}: OneHotEncoder(drop={t.drop!r}) has no Sluice step (onehot keeps every column); refit with drop=None")
            if getattr(t, "infrequent_categories_", None) is not None and any(x is not None for x in t.infrequent_categories_):
                raise ExportError(f"{where}: OneHotEncoder with infrequent categories (min_frequency, max_categories) has no Sluice step; refit without them")
        else:
            emv = getattr(t, "encoded_missing_value", np.nan)
        for j, c in enumerate(cols):
            if c.steps or c.values is not None:
                raise ExportError(f"{where}: {kind} on column {c.source!r} after another step; encode the raw column")
            cats = list(t.categories_[j])
            optional = False
            if cats and is_nan(cats[-1]):
                if isinstance(t, OneHotEncoder):
                    raise ExportError(f"{where}: OneHotEncoder on {c.source!r} learnt NaN as a category; Sluice's onehot makes a missing value missing in every column: impute it first (SimpleImputer(strategy='constant', fill_value='missing'))")
                if not is_nan(emv):
                    raise ExportError(f"{where}: OrdinalEncoder(encoded_missing_value={emv!r}) on {c.source!r}: Sluice gives a missing category NaN; refit with the default encoded_missing_value")
                cats = cats[:-1]
                optional = True
            values = []
            for v in cats:
                v = as_py(v)
                if isinstance(v, float) and v == int(v):
                    v = int(v)
                values.append(str(v))
            if len(set(values)) != len(values):
                raise ExportError(f"{where}: {kind} on {c.source!r}: categories {values} are not distinct as strings")
            c.type, c.values, c.cats = "category", values, [as_py(v) for v in cats]
            c.optional = optional and c.default is None
            c.steps.append({"op": "onehot" if isinstance(t, OneHotEncoder) else "ordinal", "field": c.name})
            if isinstance(t, OneHotEncoder):
                c.onehot = True
            else:
                c.feature = f"ordinal({c.name})"
        return cols
    raise ExportError(f"{where}: {type(t).__module__}.{type(t).__name__} has no Sluice preprocessing step "
                      "(supported: StandardScaler, MinMaxScaler, OneHotEncoder, OrdinalEncoder, SimpleImputer, ColumnTransformer, Pipeline, 'passthrough', 'drop')")


def column_indices(ct, spec, n):
    import numpy as np

    names = list(getattr(ct, "feature_names_in_", []))
    if callable(spec):
        raise ExportError("a ColumnTransformer column selector that is a callable cannot be exported; list the columns")
    if isinstance(spec, slice):
        return list(range(n))[spec]
    if isinstance(spec, (str, int, np.integer)):
        spec = [spec]
    spec = list(spec)
    if not spec:
        return []
    if all(isinstance(s, (bool, np.bool_)) for s in spec):
        return [i for i, b in enumerate(spec) if b]
    out = []
    for s in spec:
        if isinstance(s, (int, np.integer)):
            out.append(int(s) % n)
        elif s in names:
            out.append(names.index(s))
        else:
            raise ExportError(f"ColumnTransformer: column {s!r} is not one of its input columns {names}")
    return out


def apply_column_transformer(ct, cols, where):
    n = len(cols)
    if getattr(ct, "n_features_in_", n) != n:
        raise ExportError(f"{where}: ColumnTransformer was fitted on {ct.n_features_in_} columns, it receives {n}")
    used = {}
    out = []
    for name, t, spec in ct.transformers_:
        idx = column_indices(ct, spec, n)
        for i in idx:
            if i in used:
                raise ExportError(f"{where}: column {cols[i].source!r} goes to both transformers {used[i]!r} and {name!r}; a Sluice field has one chain of steps (give each column one transformer)")
            used[i] = name
        if not idx or t == "drop":
            continue
        out.extend(apply_transformer(t, [cols[i] for i in idx], f"{where}/{name}"))
    return out


# ---------------------------------------------------------------- estimators

def threshold(x):
    """A split threshold as JSON has it: an infinite one (a
    HistGradientBoosting split of missing against present values) becomes
    the largest finite float64, which sends every finite value the same way."""
    x = float(x)
    if math.isinf(x):
        return math.copysign(sys.float_info.max, x)
    return x


def tree_arrays(tree, classifier, n_classes):
    """One sklearn Tree (tree_) as the format's node arrays."""
    import numpy as np

    t = {
        "left": tree.children_left.tolist(),
        "right": tree.children_right.tolist(),
        "feature": [int(f) if l != -1 else -1 for f, l in zip(tree.feature, tree.children_left)],
        "threshold": [threshold(x) if l != -1 else 0.0 for x, l in zip(tree.threshold, tree.children_left)],
    }
    value = tree.value  # (n_nodes, n_outputs, max_n_classes)
    if classifier:
        # DecisionTreeClassifier.predict_proba's own normalization, on
        # every node at once (the same numpy operations on the same
        # numbers give the same probabilities a predict gives).
        proba = value[:, 0, :n_classes]
        normalizer = proba.sum(axis=1)[:, np.newaxis]
        normalizer[normalizer == 0.0] = 1.0
        proba = proba / normalizer
        t["value"] = proba.reshape(-1).tolist()
    else:
        t["value"] = value[:, :, 0].reshape(-1).tolist()
    mgl = getattr(tree, "missing_go_to_left", None)
    if mgl is not None:
        t["missingLeft"] = [int(x) for x in mgl]
    return t


def classes_of(est):
    import numpy as np

    classes = [as_py(c) for c in est.classes_]
    if isinstance(est.classes_, np.ndarray) and est.classes_.ndim != 1:
        raise ExportError("multi-output classifiers are not supported")
    return classes


def export_estimator(est):
    """The estimator's part of the document."""
    from sklearn import ensemble, linear_model, svm, tree

    import numpy as np

    name = type(est).__name__
    doc = {"estimator": name, "nFeatures": int(est.n_features_in_)}
    classifier = hasattr(est, "classes_")
    if classifier:
        doc["classes"] = classes_of(est)
    if isinstance(est, (tree.DecisionTreeClassifier, tree.DecisionTreeRegressor)) and name in ("DecisionTreeClassifier", "DecisionTreeRegressor", "ExtraTreeClassifier", "ExtraTreeRegressor"):
        if classifier and est.n_outputs_ != 1:
            raise ExportError(f"{name}: multi-output classifiers are not supported")
        doc["estimator"] = name.replace("ExtraTree", "DecisionTree")
        doc["trees"] = [tree_arrays(est.tree_, classifier, len(est.classes_) if classifier else 0)]
        if not classifier:
            doc["nOutputs"] = int(est.n_outputs_)
        return doc
    if isinstance(est, (ensemble.RandomForestClassifier, ensemble.RandomForestRegressor,
                        ensemble.ExtraTreesClassifier, ensemble.ExtraTreesRegressor)):
        if classifier and est.n_outputs_ != 1:
            raise ExportError(f"{name}: multi-output classifiers are not supported")
        doc["trees"] = [tree_arrays(e.tree_, classifier, len(est.classes_) if classifier else 0) for e in est.estimators_]
        if not classifier:
            doc["nOutputs"] = int(est.n_outputs_)
        return doc
    if isinstance(est, (ensemble.GradientBoostingClassifier, ensemble.GradientBoostingRegressor)):
        from sklearn.dummy import DummyClassifier, DummyRegressor

        if not (isinstance(est.init_, str) and est.init_ == "zero") and not isinstance(est.init_, (DummyClassifier, DummyRegressor)):
            raise ExportError(f"{name}: init={type(est.init_).__name__} predicts from the row; only the default init (or 'zero') can be exported")
        loss = est.loss
        if loss == "deviance":
            loss = "log_loss"
        doc["loss"] = loss
        doc["learningRate"] = float(est.learning_rate)
        zero = np.zeros((1, est.n_features_in_), dtype=np.float32)
        doc["init"] = [float(x) for x in est._raw_predict_init(zero)[0]]
        k = est.estimators_.shape[1]
        doc["trees"] = [tree_arrays(est.estimators_[i, j].tree_, False, 0)
                        for i in range(est.estimators_.shape[0]) for j in range(k)]
        return doc
    if isinstance(est, (ensemble.HistGradientBoostingClassifier, ensemble.HistGradientBoostingRegressor)):
        link = type(est._loss.link).__name__
        doc["loss"] = est.loss
        doc["link"] = {"IdentityLink": "identity", "LogLink": "log", "LogitLink": "logit", "MultinomialLogit": "multinomial"}.get(link)
        if doc["link"] is None:
            raise ExportError(f"{name}: loss {est.loss!r} (link {link}) is not supported")
        doc["init"] = [float(x) for x in np.asarray(est._baseline_prediction).reshape(-1)]
        trees = []
        for it in est._predictors:
            for p in it:
                nodes = p.nodes
                leaf = nodes["is_leaf"].astype(bool)
                t = {
                    "left": [-1 if l else int(x) for x, l in zip(nodes["left"], leaf)],
                    "right": [-1 if l else int(x) for x, l in zip(nodes["right"], leaf)],
                    "feature": [-1 if l else int(x) for x, l in zip(nodes["feature_idx"], leaf)],
                    "threshold": [0.0 if l else threshold(x) for x, l in zip(nodes["num_threshold"], leaf)],
                    "value": [float(x) if l else 0.0 for x, l in zip(nodes["value"], leaf)],
                    "missingLeft": [int(x) for x in nodes["missing_go_to_left"]],
                }
                cat = nodes["is_categorical"].astype(bool)
                if cat.any():
                    t["catIndex"] = [int(b) if c and not l else -1 for b, c, l in zip(nodes["bitset_idx"], cat, leaf)]
                    t["categories"] = [[int(w) for w in row] for row in p.raw_left_cat_bitsets]
                trees.append(t)
        doc["trees"] = trees
        if est.is_categorical_ is not None and est.is_categorical_.any():
            known, f_idx_map = est._bin_mapper.make_known_categories_bitsets()
            kc = []
            for f in range(est.n_features_in_):
                kc.append([int(w) for w in known[f_idx_map[f]]] if est.is_categorical_[f] else None)
            doc["knownCategories"] = kc
        return doc
    if type(est) in (linear_model.LogisticRegression, svm.LinearSVC):
        coef = np.atleast_2d(est.coef_)
        doc["coef"] = coef.tolist()
        doc["intercept"] = np.atleast_1d(np.asarray(est.intercept_, dtype=np.float64)).tolist()
        if len(doc["intercept"]) == 1 and coef.shape[0] > 1:
            doc["intercept"] = doc["intercept"] * coef.shape[0]
        if isinstance(est, linear_model.LogisticRegression):
            # scikit-learn's own rule: "ovr" and "multinomial" as said;
            # "auto" (and 1.5's "deprecated") one-vs-rest for two classes
            # or the liblinear solver, multinomial otherwise.
            mc = getattr(est, "multi_class", "auto")
            ovr = mc == "ovr" or (mc != "multinomial" and (len(est.classes_) <= 2 or est.solver == "liblinear"))
            doc["multiClass"] = "ovr" if ovr else "multinomial"
        return doc
    if type(est) in (linear_model.LinearRegression, linear_model.Ridge, linear_model.Lasso, linear_model.ElasticNet):
        coef = np.asarray(est.coef_, dtype=np.float64)
        doc["nOutputs"] = 1 if coef.ndim == 1 else int(coef.shape[0])
        doc["coef"] = np.atleast_2d(coef).tolist()
        icpt = np.atleast_1d(np.asarray(est.intercept_, dtype=np.float64))
        if len(icpt) == 1 and doc["nOutputs"] > 1:
            icpt = np.repeat(icpt, doc["nOutputs"])
        doc["intercept"] = icpt.tolist()
        return doc
    raise ExportError(f"{type(est).__module__}.{name} is not supported (supported: RandomForest*, ExtraTrees*, GradientBoosting*, "
                      "HistGradientBoosting*, DecisionTree*, LogisticRegression, LinearRegression, Ridge, Lasso, ElasticNet, LinearSVC)")


def output_names(doc):
    est = doc["estimator"]
    if "classes" not in doc:
        n = doc.get("nOutputs", 1)
        return ["prediction"] if n == 1 else [f"prediction{k}" for k in range(n)]
    classes = doc["classes"]
    names = ["label"]

    def part(c, i):
        return _non_field.sub("_", str(c)).strip("_") or str(i)

    if doc.get("decision"):
        return names + ["decision"]
    if est == "LinearSVC":
        if len(classes) == 2:
            return names + ["decision"]
        parts = ["decision_" + part(c, i) for i, c in enumerate(classes)]
    else:
        parts = ["probability_" + part(c, i) for i, c in enumerate(classes)]
    if len(set(parts)) != len(parts):
        parts = [p.split("_")[0] + str(i) for i, p in enumerate(parts)]
    return names + parts


# ---------------------------------------------------------------- the document

def split_pipeline(model):
    """(transformers, final estimator) of a Pipeline or a bare estimator."""
    from sklearn.pipeline import Pipeline

    if isinstance(model, Pipeline):
        steps = [s for _, s in model.steps if s not in (None, "passthrough")]
        if not steps:
            raise ExportError("the pipeline has no estimator")
        return model.steps[:-1], steps[-1]
    return [], model


def source_columns(model, est, steps):
    first = steps[0][1] if steps else est
    names = getattr(model, "feature_names_in_", None)
    if names is None:
        names = getattr(first, "feature_names_in_", None)
    n = getattr(first, "n_features_in_", None) or getattr(model, "n_features_in_", None)
    if names is not None:
        return [str(x) for x in names], True
    return [f"x{i}" for i in range(n)], False


def export(model, rows=None, n_examples=8):
    """The document (a dict) for a fitted model; rows (a pandas DataFrame or
    a 2-D array of training-like rows) give the types and the examples."""
    import sklearn
    import numpy as np

    calibrated = None
    steps, est = split_pipeline(model)
    if type(est).__name__ == "CalibratedClassifierCV":
        calibrated, model, steps, est = unwrap_calibrated(model, steps, est)
    sources, named = source_columns(model, est, steps)
    cols = [Column(s, field_name(s, f"x{i}")) for i, s in enumerate(sources)]
    seen = set()
    for c in cols:
        base, k = c.name, 2
        while c.name in seen:
            c.name, k = f"{base}_{k}", k + 1
        seen.add(c.name)
        c.feature = c.name
    all_cols = list(cols)
    for name, t in steps:
        cols = apply_transformer(t, cols, name)
    doc = {"format": FORMAT, "formatVersion": FORMAT_VERSION, "sklearnVersion": sklearn.__version__}
    doc.update(export_estimator(est))
    if calibrated is not None and calibrated["input"] == "decision" and doc["estimator"] != "LinearSVC":
        doc["decision"] = True
    width = sum(c.width() for c in cols)
    if width != doc["nFeatures"]:
        raise ExportError(f"the pipeline gives {width} columns, the estimator reads {doc['nFeatures']}")
    if named:
        # Only a model fitted on a named frame knows its columns: invented
        # names (x0, x1, ...) would make Sluice's field-order check refuse
        # a package whose fields are named otherwise.
        doc["featureNames"] = [f for c in cols for f in c.feature_names()]
    doc["outputs"] = output_names(doc)
    if calibrated is not None:
        doc["postprocess"] = calibration_steps(calibrated, doc)

    # Field types from the rows' dtypes, where they say more than "number".
    frame = to_frame(rows, sources, named) if rows is not None else None
    for c in cols:
        if c.type is not None:
            continue
        c.type = "float"
        if frame is not None:
            dt = frame[c.source].dtype
            if dt.kind == "b":
                c.type = "bool"
            elif dt.kind in "iu":
                c.type = "int"
        if c.default is not None and c.type == "int" and float(c.default) != int(c.default):
            c.type = "float"
    doc["input"] = {
        "fields": [field_doc(c) for c in cols],
        "preprocess": [st for c in cols for st in c.steps],
    }
    dropped = [c.source for c in all_cols if c not in cols]
    if dropped:
        doc["input"]["dropped"] = dropped
    doc["examples"] = examples(model, est, doc, cols, sources, named, frame, n_examples, calibrated)
    return doc


# ---------------------------------------------------------------- calibration

# The calibrated label is class 1 when its calibrated probability is above
# 0.5 (CalibratedClassifierCV.predict is argmax of [1 - p, p]: a tie is
# class 0). Sluice's threshold step labels a value >= its threshold, and
# its outputs are float32: the next float32 above 0.5 says "above".
ABOVE_HALF = 0.5000000596046448


def unwrap_calibrated(model, steps, cal):
    """A CalibratedClassifierCV with one calibrated binary classifier: the
    base model (the pipeline's steps, the base's own steps, the base
    estimator) and what the calibrator is."""
    from sklearn.pipeline import Pipeline

    ccs = getattr(cal, "calibrated_classifiers_", None)
    if ccs is None:
        raise ExportError("the CalibratedClassifierCV is not fitted")
    if len(ccs) != 1:
        raise ExportError(
            f"the CalibratedClassifierCV holds {len(ccs)} calibrated classifiers (ensemble=True averages them, "
            "which one calibration step cannot express): refit it with ensemble=False, or calibrate a fitted model with cv=\"prefit\"")
    if len(cal.classes_) != 2:
        raise ExportError(
            f"the CalibratedClassifierCV has {len(cal.classes_)} classes: only a binary classifier's calibration is exported "
            "(a multi-class one normalizes one calibrator per class)")
    cc = ccs[0]
    base = getattr(cc, "estimator", None) or getattr(cc, "base_estimator", None)
    calibrator = cc.calibrators[0]
    kind = type(calibrator).__name__
    if kind == "_SigmoidCalibration":
        cal_doc = {"method": "platt", "a": float(calibrator.a_), "b": float(calibrator.b_)}
    elif kind == "IsotonicRegression":
        x = [float(v) for v in calibrator.X_thresholds_]
        y = [float(v) for v in calibrator.y_thresholds_]
        if len(x) > 65536:
            raise ExportError(f"the isotonic calibrator has {len(x)} points; Sluice's calibrate step takes at most 65536")
        cal_doc = {"method": "isotonic", "x": x, "y": y}
    else:
        raise ExportError(f"the calibrator {kind} is not sigmoid or isotonic")
    # What the calibrator reads: decision_function where the base has one,
    # else predict_proba's column of class 1 (as scikit-learn chooses).
    cal_doc["input"] = "decision" if hasattr(base, "decision_function") else "proba"
    cal_doc["classes"] = [as_py(c) for c in cal.classes_]
    cal_doc["model"] = cal_model = (model, cal)
    inner = []
    if isinstance(base, Pipeline):
        inner = base.steps[:-1]
        base = base.steps[-1][1]
    all_steps = list(steps) + list(inner)
    base_model = Pipeline(all_steps + [("estimator", base)]) if all_steps else base
    del cal_model
    return cal_doc, base_model, all_steps, base


def calibration_steps(c, doc):
    """postprocess: the calibrator on the score it reads, then the label."""
    outs = doc["outputs"]
    col = "decision" if c["input"] == "decision" else outs[2]
    st = {"op": "calibrate", "output": col, "as": "probability", "method": c["method"]}
    for k in ("a", "b", "x", "y"):
        if k in c:
            st[k] = c[k]
    labels = [str(v) for v in c["classes"]]
    return [st, {"op": "threshold", "output": "probability", "as": "calibratedLabel", "threshold": ABOVE_HALF, "labels": labels}]


def calibrated_outputs(c, base_score):
    """What Sluice's steps answer for the base's scores (float32, as the
    model's outputs are): the calibrated probability and the label index."""
    import numpy as np

    s = np.asarray(base_score, dtype=np.float32).astype(np.float64)
    if c["method"] == "platt":
        p = 1 / (1 + np.exp(c["a"] * s + c["b"]))
    else:
        p = np.interp(s, c["x"], c["y"])
    p32 = p.astype(np.float32).astype(np.float64)
    return p32, (p32 >= ABOVE_HALF).astype(int)


def field_doc(c):
    f = {"name": c.name, "type": c.type}
    if c.values is not None:
        f["values"] = c.values
    if c.default is not None:
        d = c.default
        if c.type == "category":
            d = str(int(d)) if isinstance(d, float) and d == int(d) else str(d)
        elif c.type == "int":
            d = int(d)
        elif c.type == "bool":
            d = bool(d)
        else:
            d = float(d)
        f["default"] = d
    if c.optional:
        f["optional"] = True
    if c.source != c.name:
        f["source"] = c.source
    return f


def to_frame(rows, sources, named):
    import pandas as pd

    if isinstance(rows, pd.DataFrame):
        missing = [s for s in sources if s not in rows.columns]
        if missing:
            raise ExportError(f"the rows lack the model's columns {missing}")
        return rows[sources].reset_index(drop=True)
    return pd.DataFrame(rows, columns=sources)


def model_input(frame, named):
    return frame if named else frame.to_numpy()


def sklearn_outputs(model, doc, X):
    """scikit-learn's own outputs for rows X, in the order of doc["outputs"]."""
    import numpy as np

    n = X.shape[0]
    if "classes" not in doc:
        y = np.asarray(model.predict(X), dtype=np.float64).reshape(n, -1)
        return y
    label = model.predict(X)
    classes = doc["classes"]
    if all(isinstance(c, (int, float)) and not isinstance(c, bool) for c in classes):
        lab = np.asarray(label, dtype=np.float64)
    else:
        idx = {c: i for i, c in enumerate(classes)}
        lab = np.array([idx[as_py(v)] for v in label], dtype=np.float64)
    if doc["estimator"] == "LinearSVC" or doc.get("decision"):
        rest = np.asarray(model.decision_function(X), dtype=np.float64).reshape(n, -1)
    else:
        rest = np.asarray(model.predict_proba(X), dtype=np.float64)
    return np.column_stack([lab, rest])


def examples(model, est, doc, cols, sources, named, frame, n_examples, calibrated=None):
    import numpy as np
    import pandas as pd

    source = "given rows"
    if frame is None:
        # Zeros (the first category of a category field), as a last resort.
        source = "all-zero row"
        row = {}
        for s in sources:
            row[s] = 0.0
        for c in cols:
            if c.values is not None:
                row[c.source] = c.cats[0]
        frame = pd.DataFrame([row], columns=sources)
    # Rows Sluice would refuse are no examples: a missing value where the
    # field has no default, a category the encoder did not learn.
    keep = []
    for r in range(len(frame)):
        ok = True
        for c in cols:
            v = as_py(frame[c.source].iloc[r])
            if is_nan(v):
                ok = ok and (c.default is not None or c.optional)
            elif c.type == "category":
                v = str(int(v)) if isinstance(v, float) and v == int(v) else str(v)
                ok = ok and v in c.values
        if ok:
            keep.append(r)
        if len(keep) == 4 * n_examples:
            break
    if not keep:
        raise ExportError(f"none of the {source} can be sent to Sluice: each has a missing value in a column without an imputer, or a category its encoder did not learn")
    frame = frame.iloc[keep].reset_index(drop=True)
    X = model_input(frame, named)
    try:
        out = sklearn_outputs(model, doc, X)
        # Sluice hands the estimator float32 rows: the estimator's answer
        # on the same rows rounded to float32 says how far that moves each
        # output (the example's tolerance); a row whose label it flips sits
        # on a decision boundary and is no example.
        pre = X
        steps, _ = split_pipeline(model)
        if steps:
            from sklearn.pipeline import Pipeline

            pre = Pipeline(steps).transform(X)
        if hasattr(pre, "toarray"):
            pre = pre.toarray()
        pre32 = np.asarray(pre, dtype=np.float32).astype(np.float64)
        out32 = sklearn_outputs(est, doc, pre32)
    except Exception as e:  # noqa: BLE001 - scikit-learn's own refusal of the rows
        raise ExportError(f"scikit-learn could not predict the {source}: {e}") from e
    post = None
    if calibrated is not None:
        # scikit-learn's calibrated model on the raw rows, and what Sluice's
        # steps make of the base's float32 score on the float32 rows.
        full, cal = calibrated["model"]
        cal_p = np.asarray(full.predict_proba(X), dtype=np.float64)[:, 1]
        cal_label = full.predict(X)
        score32 = out32[:, 1] if calibrated["input"] == "decision" else out32[:, 2]
        our_p, our_label = calibrated_outputs(calibrated, score32)
        classes = calibrated["classes"]
        post = (cal_p, [classes.index(as_py(v)) for v in cal_label], our_p, our_label)
    exs = []
    for r in range(len(frame)):
        if len(exs) == n_examples:
            break
        if "classes" in doc and out[r][0] != out32[r][0]:
            continue
        if post is not None and post[1][r] != post[3][r]:
            continue  # the calibrated label flips on float32: a boundary row
        diff = float(np.max(np.abs(out[r] - out32[r])))
        tol = 1e-6
        while tol < 2 * diff:
            tol *= 10
        inst = {}
        for c in cols:
            v = as_py(frame[c.source].iloc[r])
            if is_nan(v):
                continue  # absent: the field's default, or missing
            if c.type == "category":
                v = str(int(v)) if isinstance(v, float) and v == int(v) else str(v)
            elif c.type == "bool":
                v = bool(v)
            elif c.type == "int":
                v = int(v)
            else:
                v = float(v)
            inst[c.name] = v
        ex = {"instance": inst, "outputs": [float(x) for x in out[r]]}
        if tol > 1e-6:
            ex["tolerance"] = tol
        if post is not None:
            cal_p, cal_label, our_p, _ = post
            ex["post"] = {"probability": float(cal_p[r]), "calibratedLabel": str(calibrated["classes"][cal_label[r]])}
            ptol = 1e-6
            while ptol < 2 * abs(float(cal_p[r]) - float(our_p[r])):
                ptol *= 10
            if ptol > 1e-6:
                ex["postTolerance"] = ptol
        exs.append(ex)
    if not exs:
        raise ExportError(f"each of the {source} sits on a decision boundary when read as float32; give other rows")
    return exs


# ---------------------------------------------------------------- command line

def load_model(path):
    ext = os.path.splitext(path)[1].lower()
    if ext in (".pkl", ".pickle"):
        import pickle

        with open(path, "rb") as f:
            return pickle.load(f)
    import joblib

    return joblib.load(path)


def read_rows(path):
    import pandas as pd

    return pd.read_csv(path)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Export a fitted scikit-learn model to Sluice's sklearn JSON (docs/sklearn.md).")
    ap.add_argument("model", help="the fitted estimator or pipeline: a joblib file, or a pickle (.pkl, .pickle); loading it runs its code: only files you trust")
    ap.add_argument("--out", required=True, help="folder to write model.json into (made if absent)")
    ap.add_argument("--rows", help="CSV of rows with the training frame's columns: field types and the golden examples (else zeros)")
    ap.add_argument("--examples", type=int, default=8, help=f"how many rows become examples (1..{MAX_EXAMPLES}, default 8)")
    ap.add_argument("--artifact", default="model.json", help="the artifact's file name in --out (default model.json)")
    args = ap.parse_args(argv)
    if not 1 <= args.examples <= MAX_EXAMPLES:
        print(f"sluice_export_sklearn: --examples must be between 1 and {MAX_EXAMPLES}, got {args.examples}", file=sys.stderr)
        return 2
    try:
        model = load_model(args.model)
        rows = read_rows(args.rows) if args.rows else None
        doc = export(model, rows, args.examples)
    except ExportError as e:
        print(f"sluice_export_sklearn: {args.model}: {e}", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    dst = os.path.join(args.out, args.artifact)
    if os.path.exists(dst):
        print(f"sluice_export_sklearn: {dst} exists; remove it or choose another --out", file=sys.stderr)
        return 1
    write(doc, dst)
    print(dst)
    return 0


def write(doc, path):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, allow_nan=False, separators=(",", ":"))
        f.write("\n")
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
