// Package examples embeds the example model packages so that `sluice serve`
// with no flags serves them from any working directory.
package examples

import "embed"

// FS holds every example package folder (model.yaml + artifact).
//
//go:embed */model.yaml */model.json */reference.jsonl
var FS embed.FS
