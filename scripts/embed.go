// Package scripts ships the scripts a user runs with their own tools:
// the scikit-learn exporter that `sluice export-sklearn` runs with the
// user's Python. The other files here are the repository's fixture, proto
// and service scripts, not part of the binary.
package scripts

import _ "embed"

// ExportSklearn is scripts/sluice_export_sklearn.py.
//
//go:embed sluice_export_sklearn.py
var ExportSklearn []byte
