package apispec

import (
	"net/http"
	"strings"
	"testing"
)

const doc = `openapi: 3.1.0
info: {title: t, version: "1"}
paths:
  /v1/models/{name}:
    parameters: [{name: name, in: path, required: true, schema: {type: string}}]
    get:
      responses:
        "200":
          description: a model
          content:
            application/json:
              schema: {type: object, required: [name], properties: {name: {type: string}}}
  /v1/models/{name}:predict:
    parameters: [{name: name, in: path, required: true, schema: {type: string}}]
    post:
      responses:
        "200": {description: ok, content: {application/json: {schema: {type: object}}}}
  /v1/models/{name}/versions/{n}:load:
    parameters:
      - {name: name, in: path, required: true, schema: {type: string}}
      - {name: n, in: path, required: true, schema: {type: integer}}
    post:
      responses:
        "200": {description: ok, content: {application/json: {schema: {type: object}}}}
`

func TestFind(t *testing.T) {
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, path, op string
		params           string
		err              error
	}{
		{"GET", "/v1/models/fraud", "/v1/models/{name}", "name=fraud", nil},
		{"HEAD", "/v1/models/fraud", "/v1/models/{name}", "name=fraud", nil},
		{"POST", "/v1/models/fraud:predict", "/v1/models/{name}:predict", "name=fraud", nil},
		{"GET", "/v1/models/fraud:predict", "", "", ErrNoMethod},
		{"POST", "/v1/models/fraud/versions/3:load", "/v1/models/{name}/versions/{n}:load", "n=3", nil},
		{"POST", "/v1/models/fraud/versions/3:archive", "", "", ErrNoPath},
		{"GET", "/v1/models/fraud/extra", "", "", ErrNoPath},
		{"GET", "/v1/models/", "", "", ErrNoPath},
		{"POST", "/v1/models/a:b:predict", "", "", ErrNoPath}, // a name holds no ':'
	} {
		op, params, err := s.Find(tc.method, tc.path)
		if err != tc.err {
			t.Errorf("%s %s: err %v, want %v", tc.method, tc.path, err, tc.err)
			continue
		}
		if err != nil {
			continue
		}
		if op.Path != tc.op {
			t.Errorf("%s %s: operation %s, want %s", tc.method, tc.path, op.Path, tc.op)
		}
		k, v, _ := strings.Cut(tc.params, "=")
		if params[k] != v {
			t.Errorf("%s %s: params %v, want %s", tc.method, tc.path, params, tc.params)
		}
	}
}

func TestCheck(t *testing.T) {
	s, err := Parse([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	json := http.Header{"Content-Type": {"application/json"}}
	for _, tc := range []struct {
		name, method, path string
		status             int
		body               string
		want               string // "" ok, else in the error
	}{
		{"as described", "GET", "/v1/models/fraud", 200, `{"name":"fraud"}`, ""},
		{"a required property missing", "GET", "/v1/models/fraud", 200, `{}`, "missing property 'name'"},
		{"a wrong type", "GET", "/v1/models/fraud", 200, `{"name":3}`, "got number, want string"},
		{"a status not described", "GET", "/v1/models/fraud", 500, `{}`, "status is not supported"},
		{"served but not described", "GET", "/v1/other", 200, `{}`, "add it to docs/openapi.yaml"},
		{"the server's no-route answer", "GET", "/v1/other", 404, `{"error":{"code":"not_found","message":"no route for GET /v1/other"}}`, ""},
		{"another 404 of an undescribed path", "GET", "/v1/other", 404, `{"error":{"code":"not_found","message":"model not found"}}`, "add it"},
		{"a wrong method", "DELETE", "/v1/models/fraud", 405, `{}`, ""},
	} {
		req, _ := http.NewRequest(tc.method, "http://127.0.0.1:1"+tc.path, nil)
		err := s.Check(req, tc.status, json, []byte(tc.body))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
