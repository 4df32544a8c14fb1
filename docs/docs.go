// Package docs embeds the machine-readable description of the HTTP API,
// openapi.yaml (OpenAPI 3.1), which the server answers as JSON at
// GET /openapi.json. The rest of this folder is prose for people.
package docs

import _ "embed"

// OpenAPI is docs/openapi.yaml: every /v1 and OIP REST route, checked
// against the server's routes and the internal/api types by the tests of
// internal/server, and every end-to-end response validated against it.
//
//go:embed openapi.yaml
var OpenAPI []byte
