package apispec

import (
	"bytes"
	"io"
	"log"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
)

// maxChecked is the largest answer body a Transport validates; a larger
// one passes with its status and headers checked only.
const maxChecked = 32 << 20

// Transport is an http.RoundTripper that validates every answer from the
// hosts it watches against the description, so a test that talks to a
// real server through it checks each response it gets. Answers from
// other hosts pass unchecked.
type Transport struct {
	Spec *Spec
	Next http.RoundTripper // nil: http.DefaultTransport at the time of the call

	mu    sync.Mutex // guards hosts
	hosts map[string]func(error)

	checked, failed atomic.Int64
}

// Watch validates the answers of host ("127.0.0.1:8080") from now on,
// reporting each mismatch to fail, until the returned func is called
// (after it returns fail is not called again: a test's t.Errorf is safe).
func (t *Transport) Watch(host string, fail func(error)) (stop func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.hosts == nil {
		t.hosts = map[string]func(error){}
	}
	t.hosts[host] = fail
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		delete(t.hosts, host)
	}
}

// Counts says how many answers were validated and how many failed.
func (t *Transport) Counts() (checked, failed int64) { return t.checked.Load(), t.failed.Load() }

// RoundTrip sends req and validates the answer when its host is watched:
// the body is read (up to 32 MiB) and handed on unchanged; an event
// stream's body is not read (its status and headers are checked).
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	next := t.Next
	if next == nil {
		next = http.DefaultTransport
	}
	resp, err := next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	t.mu.Lock()
	fail := t.hosts[req.URL.Host]
	t.mu.Unlock()
	if fail == nil {
		return resp, nil
	}
	var body []byte
	if ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct != "text/event-stream" && req.Method != http.MethodHead {
		b, all, rerr := readAll(resp.Body, maxChecked)
		if rerr != nil {
			resp.Body.Close()
			return nil, rerr
		}
		if all {
			resp.Body.Close()
			resp.Body = io.NopCloser(bytes.NewReader(b))
			body = b
		} else {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(b), resp.Body), resp.Body}
		}
	}
	t.checked.Add(1)
	if err := t.Spec.Check(req, resp.StatusCode, resp.Header, body); err != nil {
		t.failed.Add(1)
		t.mu.Lock() // (held while fail runs: once stop returned, fail is never called)
		if fail := t.hosts[req.URL.Host]; fail != nil {
			fail(err)
		}
		t.mu.Unlock()
	}
	return resp, nil
}

// Proxy starts a reverse proxy on 127.0.0.1 in front of target whose
// answers pass through t (so they are validated when target's host is
// watched): a program the test runs (the CLI) is pointed at the proxy
// and its traffic is checked as the test's own is. When target cannot be
// reached the proxy drops the client's connection, as the dead server
// would. The caller closes the server.
func (t *Transport) Proxy(target *url.URL) *httptest.Server {
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = target.Host },
		Transport:     t,
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if c, _, herr := http.NewResponseController(w).Hijack(); herr == nil {
				c.Close()
				return
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	return httptest.NewServer(rp)
}
