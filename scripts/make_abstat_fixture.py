#!/usr/bin/env python3
"""Writes internal/abstat/testdata/reference.json: the reference numbers
internal/abstat's tests compare against, computed once with scipy (and
numpy), independently of the Go code:

- each arm's 95 % interval: scipy.stats.binomtest(...).proportion_ci(
  method="wilson") for 0/1 outcomes, the mean ± norm.ppf(0.975)·s/√n
  otherwise;
- the lift's and the relative lift's (delta method) 95 % intervals;
- the mSPRT's always-valid p-value and confidence sequences (Johari et al.,
  normal mixture), from the formula (the relative one on the log scale);
- the sample-ratio mismatch p-value: scipy.stats.chisquare;
- Welch's t-test p-value (scipy.stats.ttest_ind_from_stats), which the
  simulation's fixed-horizon contrast uses;
- model quality over seeded (prediction, label) pairs: log loss, MAE, RMSE
  with normal intervals, AUC as scipy.stats.mannwhitneyu's U / (m·n) and
  DeLong's variance by its pairwise definition (O(m·n), not the midranks
  the Go code uses).

Run with Debian's python3-scipy (apt-get install python3-scipy):
    /usr/bin/python3 scripts/make_abstat_fixture.py
"""
import json
import math
import os

import numpy as np
from scipy import stats

OUT = os.path.join(os.path.dirname(__file__), "..", "internal", "abstat", "testdata", "reference.json")
Z = stats.norm.ppf(0.975)
DEFAULT_EFFECT_SD = 0.05  # abstat.DefaultEffectSD


def arm_summary(arm, binary):
    n, s, ss = arm["n"], arm["sum"], arm["sumSq"]
    mean = s / n
    if binary:
        var = mean * (1 - mean)
        ci = stats.binomtest(int(round(s)), n).proportion_ci(confidence_level=0.95, method="wilson")
        lo, hi = ci.low, ci.high
    else:
        var = (ss - s * s / n) / (n - 1)
        h = Z * math.sqrt(var / n)
        lo, hi = mean - h, mean + h
    return mean, var, lo, hi


def seq_half(v, tau2, alpha):
    return math.sqrt(2 * v * (v + tau2) / tau2 * (math.log(1 / alpha) + 0.5 * math.log((v + tau2) / v)))


def evaluate(case):
    a, b, cfg = case["a"], case["b"], case["config"]
    alpha = cfg.get("alpha") or 0.05
    share = cfg.get("shareB") or 0.5
    direction = cfg.get("direction") or "increase"
    min_effect = cfg.get("minEffect") or 0.0
    binary = case["binary"]
    ma, va, loa, hia = arm_summary(a, binary)
    mb, vb, lob, hib = arm_summary(b, binary)
    sa, sb = va / a["n"], vb / b["n"]
    v = sa + sb
    lift = mb - ma
    tau2 = cfg.get("tau2") or DEFAULT_EFFECT_SD ** 2 * (va + vb) / 2
    lam = math.sqrt(v / (v + tau2)) * math.exp(lift * lift * tau2 / (2 * v * (v + tau2)))
    p = min(case["prevP"], min(1.0, 1 / lam))
    hs = seq_half(v, tau2, alpha)
    rel = lift / ma
    vr = sb / ma ** 2 + mb ** 2 * sa / ma ** 4
    if ma * mb > 0:
        # the relative confidence sequence on the log scale: log(mB/mA)
        lg = math.log(mb / ma)
        hsl = seq_half(sb / mb ** 2 + sa / ma ** 2, tau2 / ma ** 2, alpha)
        seq_rel = (math.expm1(lg - hsl), math.expm1(lg + hsl))
    else:
        hsr = seq_half(vr, tau2 / ma ** 2, alpha)
        seq_rel = (rel - hsr, rel + hsr)
    ua, ub = a["units"], b["units"]
    u = ua + ub
    srm = stats.chisquare([ua, ub], f_exp=[(1 - share) * u, share * u]).pvalue
    # Welch's t-test from the sample variances (ddof 1) of the outcomes.
    sda = math.sqrt((a["sumSq"] - a["sum"] ** 2 / a["n"]) / (a["n"] - 1))
    sdb = math.sqrt((b["sumSq"] - b["sum"] ** 2 / b["n"]) / (b["n"] - 1))
    welch = stats.ttest_ind_from_stats(mb, sdb, b["n"], ma, sda, a["n"], equal_var=False).pvalue
    significant = p < alpha
    if significant and (lift > 0) == (direction == "increase"):
        decision = "b_better"
    elif significant:
        decision = "a_better"
    elif min_effect > 0 and seq_rel[0] > -min_effect and seq_rel[1] < min_effect:
        decision = "no_difference"
    else:
        decision = "running"
    return {
        "a": {"mean": ma, "stdErr": math.sqrt(va / a["n"]), "low": loa, "high": hia},
        "b": {"mean": mb, "stdErr": math.sqrt(vb / b["n"]), "low": lob, "high": hib},
        "lift": lift, "liftLow": lift - Z * math.sqrt(v), "liftHigh": lift + Z * math.sqrt(v),
        "relLift": rel, "relLow": rel - Z * math.sqrt(vr), "relHigh": rel + Z * math.sqrt(vr),
        "seqLow": lift - hs, "seqHigh": lift + hs, "seqRelLow": seq_rel[0], "seqRelHigh": seq_rel[1],
        "tau2": tau2, "pValue": p, "significant": bool(significant),
        "srmPValue": srm, "srm": bool(srm < 0.001), "decision": decision, "welchPValue": welch,
    }


def binary_arm(units, conv):
    return {"units": units, "n": units, "sum": float(conv), "sumSq": float(conv)}


def cont_arm(rng, units, n, mean, sd):
    x = rng.normal(mean, sd, n).round(2)
    return {"units": units, "n": n, "sum": float(x.sum()), "sumSq": float((x * x).sum())}


def experiments():
    rng = np.random.default_rng(22)
    cases = [
        ("conversion equal", binary_arm(5000, 500), binary_arm(5000, 500), {}, 1.0, True),
        ("conversion 10% lift at 25k per arm", binary_arm(25000, 2500), binary_arm(25000, 2750), {}, 1.0, True),
        ("conversion small n", binary_arm(60, 5), binary_arm(55, 9), {}, 1.0, True),
        ("conversion worse", binary_arm(20000, 2200), binary_arm(20000, 1900), {}, 1.0, True),
        ("conversion worse, decrease is better", binary_arm(20000, 2200), binary_arm(20000, 1900), {"direction": "decrease"}, 1.0, True),
        ("conversion prevP lower than now", binary_arm(5000, 500), binary_arm(5000, 520), {}, 0.2, True),
        ("conversion broken split 60/40", binary_arm(6000, 600), binary_arm(4000, 400), {}, 1.0, True),
        ("conversion split 90/10 as configured", binary_arm(9000, 900), binary_arm(1000, 104), {"shareB": 0.1}, 1.0, True),
        ("conversion no difference at 1M", binary_arm(1000000, 100000), binary_arm(1000000, 100150), {"minEffect": 0.02}, 1.0, True),
        ("conversion min effect not yet ruled out", binary_arm(20000, 2000), binary_arm(20000, 2010), {"minEffect": 0.02}, 1.0, True),
        ("conversion alpha 0.01 and tau2 set", binary_arm(30000, 3000), binary_arm(30000, 3240), {"alpha": 0.01, "tau2": 0.0001}, 1.0, True),
        ("rare events", binary_arm(100000, 120), binary_arm(100000, 171), {}, 1.0, True),
        ("revenue equal", cont_arm(rng, 3000, 3000, 20, 15), cont_arm(rng, 3000, 3000, 20, 15), {}, 1.0, False),
        ("revenue 5% lift", cont_arm(rng, 20000, 20000, 20, 15), cont_arm(rng, 20000, 20000, 21, 15), {}, 1.0, False),
        ("latency lower is better", cont_arm(rng, 8000, 8000, 120, 30), cont_arm(rng, 8000, 8000, 117, 30), {"direction": "decrease"}, 1.0, False),
        ("negative mean", cont_arm(rng, 5000, 5000, -3, 2), cont_arm(rng, 5000, 5000, -3.1, 2), {"minEffect": 0.5}, 1.0, False),
        ("few outcomes per unit", cont_arm(rng, 9000, 400, 50, 10), cont_arm(rng, 9100, 420, 51, 10), {}, 1.0, False),
    ]
    out = []
    for name, a, b, cfg, prev, binary in cases:
        case = {"name": name, "a": a, "b": b, "config": cfg, "prevP": prev, "binary": binary}
        case["want"] = evaluate(case)
        out.append(case)
    return out


def normal_ci(xs):
    m = float(np.mean(xs))
    h = Z * float(np.std(xs, ddof=1)) / math.sqrt(len(xs))
    return m, m - h, m + h


def delong_pairwise(pos, neg):
    # psi(x, y) = 1 if x > y, 1/2 if equal, 0 otherwise
    psi = (pos[:, None] > neg[None, :]).astype(float) + 0.5 * (pos[:, None] == neg[None, :])
    auc = psi.mean()
    v10 = psi.mean(axis=1)
    v01 = psi.mean(axis=0)
    var = np.var(v10, ddof=1) / len(pos) + np.var(v01, ddof=1) / len(neg)
    return auc, math.sqrt(var)


def quality_sets():
    rng = np.random.default_rng(23)
    sets = []
    # A classifier with continuous scores.
    y = rng.integers(0, 2, 300)
    p = 1 / (1 + np.exp(-(rng.normal(0, 1, 300) + 1.2 * (y - 0.5))))
    sets.append(("classifier", p, y))
    # Scores rounded to one decimal: many ties.
    y = rng.integers(0, 2, 200)
    p = np.clip(np.round(0.5 + 0.25 * (y - 0.5) + rng.normal(0, 0.2, 200), 1), 0, 1)
    sets.append(("classifier with ties, 0 and 1 predictions", p, y))
    # Imbalanced: 5 % positives.
    y = (rng.random(400) < 0.05).astype(int)
    p = 1 / (1 + np.exp(-(rng.normal(-2, 1, 400) + 1.5 * y)))
    sets.append(("imbalanced", p, y))
    out = []
    for name, p, y in sets:
        q = np.clip(p, 1e-15, 1 - 1e-15)
        losses = -(y * np.log(q) + (1 - y) * np.log(1 - q))
        pos, neg = p[y == 1], p[y == 0]
        u = stats.mannwhitneyu(pos, neg, alternative="two-sided").statistic
        auc_u = u / (len(pos) * len(neg))
        auc, se = delong_pairwise(pos, neg)
        assert abs(auc - auc_u) < 1e-12
        ll = normal_ci(losses)
        out.append({
            "name": name, "kind": "binary",
            "pred": p.tolist(), "label": y.astype(float).tolist(),
            "logLoss": {"value": ll[0], "low": ll[1], "high": ll[2]},
            "auc": {"value": auc_u, "low": max(0.0, auc - Z * se), "high": min(1.0, auc + Z * se), "se": se},
        })
    # A regressor.
    y = rng.normal(100, 20, 250).round(1)
    p = y + rng.normal(2, 8, 250)
    err = np.abs(p - y)
    sq = (p - y) ** 2
    mae = normal_ci(err)
    mse = normal_ci(sq)
    out.append({
        "name": "regressor", "kind": "regression",
        "pred": p.tolist(), "label": y.tolist(),
        "mae": {"value": mae[0], "low": mae[1], "high": mae[2]},
        "rmse": {"value": math.sqrt(mse[0]), "low": math.sqrt(max(0.0, mse[1])), "high": math.sqrt(mse[2])},
    })
    return out


def main():
    doc = {
        "generator": "scripts/make_abstat_fixture.py",
        "scipy": __import__("scipy").__version__,
        "numpy": np.__version__,
        "z975": Z,
        "experiments": experiments(),
        "quality": quality_sets(),
    }
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
