// Package sklearn is Sluice's pure-Go runtime for scikit-learn models,
// which it reads from the JSON that scripts/sluice_export_sklearn.py
// writes (format "sluice-sklearn", formatVersion 1, docs/sklearn.md),
// never from a pickle: loading a pickle runs code, so the exporter runs in
// the user's own Python and the server reads numbers and names only.
//
// Estimators: RandomForest, ExtraTrees, DecisionTree (classifiers and
// regressors, multi-output regressors too), GradientBoosting (log_loss,
// exponential; squared_error, absolute_error, huber, quantile),
// HistGradientBoosting (with its missing-value directions and categorical
// splits; logit, multinomial, identity and log links), LogisticRegression
// (one-vs-rest and multinomial), LinearSVC, LinearRegression, Ridge,
// Lasso and ElasticNet. A classifier's outputs are predict's label (the
// class, or its index when the classes are strings) and predict_proba's
// columns (a LinearSVC: decision_function's); a regressor's, predict's.
//
// Trees are evaluated as scikit-learn does: a float32 row value goes left
// when it is <= the split's float64 threshold (kept as the largest float32
// not above it, which decides every float32 the same way), the raw scores
// are summed in float64 in tree order (a forest's mean divided once at the
// end, GradientBoosting's leaves times the learning rate, as
// predict_stages adds them), then the loss's link. The walk is the
// xgboost runtime's: children adjacent, rows in blocks, eight rows through
// a tree together with a branch-free, unchecked step; trees with
// categorical splits take a bounds-checked step. Linear models compute
// coef · x + intercept in float64.
//
// A tree model without missing-value handling (scikit-learn 1.2's forests,
// trees and GradientBoosting) refuses a NaN as scikit-learn does; one with
// it (HistGradientBoosting, trees exported from scikit-learn 1.3 or later
// with missing_go_to_left) sends it the node's way.
//
// The artifact also carries what the exporter made of the pipeline in
// front of the estimator (Input: fields and preprocessing steps) and a
// few rows with scikit-learn's own outputs (Examples); Describe returns
// them for sluice init and sluice export-sklearn. Everything is bounded
// (trees, nodes, depth, features, classes, coefficients, names) and a
// malformed artifact is an error naming the key, never a panic.
//
// The runtime registers itself with package runtime as "sklearn".
package sklearn
