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
//     anything is allocated, nesting depth is bounded);
//   - validating the model: booster "gbtree" only, a fixed set of
//     objectives, numerical splits only, trees that are well formed (children
//     in range, every node reached at most once, no cycles, bounded depth,
//     split features inside num_feature). Anything else is refused at load
//     with an error saying what is unsupported; a malformed artifact is an
//     error, never a panic;
//   - flattening the trees into one compact node array (children of a node
//     are adjacent) and evaluating it the way XGBoost's CPU predictor does,
//     so that raw margins are bit-for-bit identical to
//     Booster.predict(output_margin=True): the margin of each output group
//     starts at the objective's margin transform of base_score and the leaf
//     value of every tree of that group is added in float32, in tree order.
//
// Supported objectives: binary:logistic, binary:logitraw, reg:squarederror,
// reg:logistic, count:poisson, multi:softprob and multi:softmax. Predictions
// always use every tree (XGBoost's default iteration range); a best_iteration
// attribute is ignored, as Booster.predict ignores it. Missing values are NaN
// and follow each split's default direction.
//
// Parse returns the concrete *Model, whose PredictMargin gives raw margins
// (what Booster.predict(output_margin=True) gives) next to the transformed
// Predict. A Model is read-only after loading and safe for concurrent use.
//
// The runtime registers itself with package runtime as "xgboost".
package xgboost
