// Package web holds the console's files (web/console: index.html, app.js,
// app.css), embedded in the binary; internal/server serves them at /ui/.
// The console is a client of the public API only (web/README.md).
package web

import (
	"embed"
	"io/fs"
)

//go:embed console
var files embed.FS

// Console is the console's files, index.html at the root.
func Console() fs.FS {
	sub, err := fs.Sub(files, "console")
	if err != nil {
		panic(err) // the embed above guarantees the folder
	}
	return sub
}
