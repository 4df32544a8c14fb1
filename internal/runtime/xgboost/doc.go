// Package xgboost is Sluice's pure-Go runtime for XGBoost gradient-boosted
// tree models. It owns everything between the artifact bytes written by
// XGBoost's Booster.save_model and a batch of predictions:
//
//   - decoding the artifact, in either of XGBoost's two model formats: JSON
//     ("m.json") and Universal Binary JSON ("m.ubj"). Both begin with '{'
//     (a UBJSON object starts with the same byte), so the byte after it
//     decides: '"', '}' or whitespace is JSON, a UBJSON length marker is
//     UBJSON (see looksLikeJSON). The UBJSON decoder is
//     written by hand in this package (ubjson.go): it is small, there is no
//     Go library worth depending on, and it must be hardened against hostile
//     input (sizes are checked against the bytes actually present before
//     anything is allocated, nesting depth is bounded). In JSON, NaN,
//     Infinity and -Infinity, which XGBoost's writer prints as bare tokens
//     (the split condition of every categorical split is NaN), are read as
//     numbers (see quoteNonFinite);
//   - validating the model: booster "gbtree" or "dart", the objectives of
//     the objectives table, numerical and categorical splits, trees that
//     are well formed (children in range, every node reached at most once,
//     no cycles, bounded depth, split features inside num_feature, category
//     sets inside [0, 2^24)). Anything else (gblinear, vector leaves of
//     multi_strategy "multi_output_tree", reg:expectileerror, a custom
//     objective) is refused at load with an error saying what is
//     unsupported; a malformed artifact is an error, never a panic;
//   - flattening the trees into one compact node array (children of a node
//     are adjacent) and evaluating it the way XGBoost's CPU predictor does,
//     so that raw margins are bit-for-bit identical to
//     Booster.predict(output_margin=True): the margin of each output group
//     starts at the objective's margin transform of base_score (one per
//     group where the model has a list) and the leaf value of every tree of
//     that group is added in float32, in tree order. A dart model's leaves
//     are scaled once at load by their tree's weight_drop, which gives the
//     float32 products Dart::PredictBatchImpl adds. A categorical split
//     sends the categories of its set right and every other code left,
//     invalid ones (negative, at or above 2^24) included, a fractional code
//     truncated, as common::Decision does; a model with categorical splits
//     walks with a bounds-checked step that tests for a category set
//     (stepCat), one without them keeps the branch-free unchecked step.
//
// Supported objectives: binary:logistic, binary:logitraw, binary:hinge,
// reg:squarederror, reg:squaredlogerror, reg:absoluteerror,
// reg:pseudohubererror, reg:quantileerror, reg:logistic, reg:tweedie,
// reg:gamma, count:poisson, survival:cox, survival:aft, rank:pairwise,
// rank:ndcg, rank:map, multi:softprob and multi:softmax. Outputs are what
// Booster.predict gives: probabilities for the logistic ones, 0/1 for
// hinge, exp of the margin for tweedie, gamma, poisson, cox (hazard ratio)
// and aft (survival time), the margin for the others (ranking scores
// included), num_class probabilities or the class index for multi-class,
// and one column per target for a multi-target model (num_target > 1, one
// tree per target and round; reg:quantileerror with several quantile_alpha,
// whose quantiles a model written by XGBoost 3.4 or later sorts per row, as
// that predict does). Predictions always use every tree (XGBoost's default
// iteration range); a best_iteration attribute is ignored, as
// Booster.predict ignores it. Missing values are NaN and follow each
// split's default direction.
//
// Parse returns the concrete *Model, whose PredictMargin gives raw margins
// (what Booster.predict(output_margin=True) gives) next to the transformed
// Predict. A Model is read-only after loading and safe for concurrent use.
//
// The runtime registers itself with package runtime as "xgboost".
package xgboost
