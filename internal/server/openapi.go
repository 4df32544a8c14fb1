package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/sluiceml/sluice/docs"
	"github.com/sluiceml/sluice/internal/errs"
)

// openAPIJSON is docs/openapi.yaml as JSON, converted once, at the first
// GET /openapi.json (the YAML is embedded in the binary).
var openAPIJSON = sync.OnceValues(func() ([]byte, error) { return yamlToJSON(docs.OpenAPI) })

// yamlToJSON converts a YAML document whose mappings have string keys
// (an OpenAPI document) to JSON.
func yamlToJSON(b []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("docs/openapi.yaml: %w", err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("docs/openapi.yaml as JSON: %w", err)
	}
	return out, nil
}

// openAPI serves GET /openapi.json: the API's OpenAPI 3.1 description.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) error {
	b, err := openAPIJSON()
	if err != nil {
		return errs.Wrap(errs.Internal, err, "openapi.json")
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	setWriteDeadline(w, len(b))
	_, _ = w.Write(b)
	return nil
}
