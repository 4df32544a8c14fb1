// Package examples embeds the example model packages that `sluice serve`
// with no flags serves from any working directory: fraud and iris
// (XGBoost) and churn (a scikit-learn logistic regression, with a drift
// reference sample). The mlp example (ONNX) is not embedded: it needs ONNX
// Runtime's shared library (docs/onnx.md); serve it with --models examples.
// Nor is fraud-features: it fills its card aggregates from a feature store
// (--features-redis or --features-postgres), without which it refuses to
// load; it lives one folder down, so --models examples (which reads the
// folders directly under it) leaves it out: serve it with
// --models examples/features/fraud-features and a store.
package examples

import "embed"

// FS holds the embedded example package folders.
//
//go:embed fraud/model.yaml fraud/model.json iris/model.yaml iris/model.json churn/model.yaml churn/model.json churn/reference.jsonl
var FS embed.FS
