// Package bench is an open-loop load generator for a Sluice server's
// predict API. It sends requests at intended times fixed in advance by an
// arrival process (constant or poisson), whether or not earlier requests
// have been answered, and measures each request's latency from its intended
// send time. That avoids coordinated omission: a server stall delays every
// request that should have been sent during it, and the corrected latencies
// show the stall the way real users would see it. The uncorrected latency
// (from the moment the request actually got a connection) is reported too,
// for comparison with closed-loop tools.
//
// `sluice bench` (cmd/sluice/bench.go) is a thin command over Run and
// RunSweep; docs/bench.md explains the numbers.
package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Limits and defaults.
const (
	MaxRate            = 1_000_000 // requests/s
	MaxArrivals        = 50_000_000
	MaxDuration        = 24 * time.Hour
	MaxInstances       = 100_000
	MaxConcurrency     = 1_000_000
	DefaultConcurrency = 10_000
	DefaultTimeout     = 10 * time.Second
	DefaultMaxSamples  = 1 << 21
	// LagWarning is the dispatch lag (p99) above which the generator is
	// reported as having fallen behind its schedule.
	LagWarning = time.Millisecond
	bodyPool   = 1024 // distinct generated bodies, reused round-robin
)

// Config describes one run.
type Config struct {
	// Server is the base URL, e.g. http://127.0.0.1:8080.
	Server string
	// Model is the model name; requests go to /v1/models/{Model}:predict.
	Model string
	// Rate is the offered load in requests per second.
	Rate float64
	// Duration is how long arrivals are scheduled for. Requests still in
	// flight at the end are waited for (up to Timeout).
	Duration time.Duration
	// Arrivals is "constant" (the default) or "poisson".
	Arrivals string
	// Payload is a full request body ({"instances":[...]}) sent with every
	// request. When empty, bodies are generated from the model's input
	// schema (GET /v1/models/{Model}).
	Payload []byte
	// InstancesPerRequest is the number of generated instances per request
	// (default 1). It does not apply to Payload.
	InstancesPerRequest int
	// DeadlineMs, when > 0, is sent as the request's deadlineMs (also into
	// Payload) and defines goodput: 2xx answers within the deadline,
	// counted from the intended send time. When 0, a deadlineMs in Payload
	// is used for goodput if present.
	DeadlineMs int
	// Concurrency caps requests in flight (default 10000). An arrival that
	// finds the cap reached is not sent and is counted as dropped by the
	// generator.
	Concurrency int
	// Connections caps TCP connections to the server (0: no cap, one per
	// in-flight request). Requests beyond it wait for a free connection;
	// that wait counts in the corrected latency only.
	Connections int
	// Timeout bounds each request (default 10s).
	Timeout time.Duration
	// APIKey, when set, is sent as "Authorization: Bearer APIKey".
	APIKey string
	// TLS configures an https:// Server (nil: Go's defaults, the system's
	// roots). Connections speak HTTP/1.1 over TLS as over plain TCP, so
	// the two compare.
	TLS *tls.Config
	// Seed fixes poisson gaps and generated payloads.
	Seed int64
	// MaxSamples bounds the latency samples kept per distribution (default
	// 2Mi); past it a uniform sample is kept, so memory stays bounded.
	MaxSamples int
	// Warnf, when set, receives warnings as they happen (the first request
	// dropped by the generator). All warnings also end up in
	// Result.Warnings.
	Warnf func(format string, args ...any)
	// Route, when set, names the model of arrival i (0, 1, …; e.g. a Zipf
	// draw): that request goes to /v1/models/{Route(i)}:predict instead of
	// Model's. Generated payloads still come from Model's schema, so every
	// routed model must take the same input. It is called from the
	// dispatch loop: keep it cheap and deterministic.
	Route func(i int) string
	// Observe, when set, receives every sent request's outcome when it
	// ends, one call at a time (under the collector's lock: keep it short).
	// The Result's figures are the same with or without it.
	Observe func(Outcome)
}

// Outcome is what happened to one sent request (Config.Observe).
type Outcome struct {
	Index   int           // arrival number, from 0
	Model   string        // the model it was sent to
	At      time.Duration // intended send time, from the start of the run
	Latency time.Duration // intended send time to the end of the answer (corrected)
	Status  int           // HTTP status; 0: no HTTP answer
	Code    string        // the error body's code (non-2xx), or why there was no answer
}

// Result is what one run measured.
type Result struct {
	Model               string        `json:"model"`
	Server              string        `json:"server"`
	Arrivals            string        `json:"arrivals"`
	InstancesPerRequest int           `json:"instancesPerRequest"`
	DeadlineMs          int           `json:"deadlineMs,omitempty"`
	Duration            time.Duration `json:"-"` // configured arrival window
	Elapsed             time.Duration `json:"-"` // start to last answer

	// OfferedRate is the target rate (requests/s).
	OfferedRate float64 `json:"offeredRate"`
	// SendRate is requests actually sent per second of the arrival window.
	SendRate float64 `json:"sendRate"`
	// AchievedRate is answers (any HTTP status) per second of Elapsed.
	AchievedRate float64 `json:"achievedRate"`
	// Goodput is 2xx answers within the deadline per second of Elapsed.
	Goodput float64 `json:"goodput"`

	Scheduled          int `json:"scheduled"`          // arrivals whose time came
	Sent               int `json:"sent"`               // requests started
	Answered           int `json:"answered"`           // got an HTTP response
	OK                 int `json:"ok"`                 // 2xx
	Good               int `json:"good"`               // 2xx within the deadline
	DroppedByGenerator int `json:"droppedByGenerator"` // not sent: in-flight cap reached
	TransportErrors    int `json:"transportErrors"`    // sent, no HTTP response

	// Latency is measured from the intended send time to the end of the
	// response (corrected for coordinated omission), over all answers.
	Latency Percentiles `json:"latency"`
	// Uncorrected is measured from when the request got its connection.
	Uncorrected Percentiles `json:"uncorrectedLatency"`
	// ServerLatency is the server's own time for each 2xx answer (its
	// Server-Timing total: from the request read to the answer written),
	// which no lag of this generator or its machine is part of; zero when
	// the server sends no Server-Timing.
	ServerLatency Percentiles `json:"serverLatency"`
	// DispatchLag is how late the generator dispatched requests relative to
	// their intended times.
	DispatchLag Percentiles `json:"dispatchLag"`
	// FellBehind is set when dispatch lag p99 exceeded LagWarning or
	// requests were dropped by the generator: the offered load was not
	// fully offered.
	FellBehind bool `json:"fellBehind"`

	ByStatus          map[int]int    `json:"byStatus"`
	ByCode            map[string]int `json:"byCode"`
	TransportByReason map[string]int `json:"transportErrorsByReason,omitempty"`

	Interrupted bool     `json:"interrupted,omitempty"`
	Warnings    []string `json:"warnings,omitempty"`
}

// MarshalJSON adds durations in seconds.
func (r Result) MarshalJSON() ([]byte, error) {
	type plain Result
	return json.Marshal(struct {
		plain
		DurationS float64 `json:"durationSeconds"`
		ElapsedS  float64 `json:"elapsedSeconds"`
	}{plain(r), r.Duration.Seconds(), r.Elapsed.Seconds()})
}

// Run sends cfg.Rate requests per second for cfg.Duration and reports what
// happened. It returns an error only for a bad configuration or when no
// payload can be made; failed requests are results. If ctx ends early the
// partial result is returned with Interrupted set.
func Run(ctx context.Context, cfg Config) (Result, error) {
	if err := cfg.check(); err != nil {
		return Result{}, err
	}
	client := newClient(cfg)
	defer client.CloseIdleConnections()
	p, err := preparePayloads(ctx, client, cfg)
	if err != nil {
		return Result{}, err
	}
	return run(ctx, client, cfg, p), nil
}

func (c *Config) check() error {
	u, err := url.Parse(c.Server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("bench: server %q is not an http(s) URL like http://127.0.0.1:8080", c.Server)
	}
	if c.Model == "" {
		return fmt.Errorf("bench: model name is required")
	}
	if !(c.Rate > 0) || c.Rate > MaxRate {
		return fmt.Errorf("bench: rate must be above 0 and at most %d requests/s, got %g", MaxRate, c.Rate)
	}
	if c.Duration <= 0 || c.Duration > MaxDuration {
		return fmt.Errorf("bench: duration must be above 0 and at most %v, got %v", MaxDuration, c.Duration)
	}
	if n := c.Rate * c.Duration.Seconds(); n > MaxArrivals {
		return fmt.Errorf("bench: rate × duration is %.0f requests, at most %d are allowed per run", n, MaxArrivals)
	}
	switch c.Arrivals {
	case "":
		c.Arrivals = Constant
	case Constant, Poisson:
	default:
		return fmt.Errorf("bench: unknown arrival process %q (use constant or poisson)", c.Arrivals)
	}
	if c.InstancesPerRequest < 0 || c.InstancesPerRequest > MaxInstances {
		return fmt.Errorf("bench: instances per request must be between 1 and %d, got %d", MaxInstances, c.InstancesPerRequest)
	}
	if len(c.Payload) > 0 && c.InstancesPerRequest > 1 {
		return fmt.Errorf("bench: instances per request applies to generated payloads, not to a given payload")
	}
	if c.InstancesPerRequest == 0 {
		c.InstancesPerRequest = 1
	}
	if c.DeadlineMs < 0 || c.DeadlineMs > 3_600_000 {
		return fmt.Errorf("bench: deadline must be between 0 (none) and 3600000 ms, got %d", c.DeadlineMs)
	}
	if c.Concurrency < 0 || c.Concurrency > MaxConcurrency {
		return fmt.Errorf("bench: concurrency must be between 1 and %d, got %d", MaxConcurrency, c.Concurrency)
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Connections < 0 {
		return fmt.Errorf("bench: connections must not be negative, got %d", c.Connections)
	}
	if c.Timeout < 0 {
		return fmt.Errorf("bench: timeout must not be negative, got %v", c.Timeout)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.MaxSamples < 0 {
		return fmt.Errorf("bench: max samples must not be negative")
	}
	if c.MaxSamples == 0 {
		c.MaxSamples = DefaultMaxSamples
	}
	return nil
}

func newClient(cfg Config) *http.Client {
	idle := cfg.Concurrency
	if cfg.Connections > 0 {
		idle = cfg.Connections
	}
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        idle,
		MaxIdleConnsPerHost: idle,
		MaxConnsPerHost:     cfg.Connections,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		TLSHandshakeTimeout: 5 * time.Second,
		TLSClientConfig:     cfg.TLS,
	}
	return &http.Client{Transport: tr}
}

func predictURL(server, model string) string {
	return strings.TrimRight(server, "/") + "/v1/models/" + url.PathEscape(model) + ":predict"
}

// payloads are the bodies a run sends, round-robin.
type payloads struct {
	bodies     [][]byte
	deadlineMs int // for goodput; 0: none
	instances  int // per request
}

func preparePayloads(ctx context.Context, client *http.Client, cfg Config) (*payloads, error) {
	if len(cfg.Payload) > 0 {
		b, d, err := preparePayload(cfg.Payload, cfg.DeadlineMs)
		if err != nil {
			return nil, err
		}
		var req struct {
			Instances []json.RawMessage `json:"instances"`
		}
		_ = json.Unmarshal(b, &req) // already known to be an object
		return &payloads{bodies: [][]byte{b}, deadlineMs: d, instances: len(req.Instances)}, nil
	}
	mi, err := FetchModel(ctx, client, cfg.Server, cfg.Model, cfg.APIKey)
	if err != nil {
		return nil, err
	}
	g, err := NewGenerator(mi.Input.Fields, cfg.Seed)
	if err != nil {
		return nil, err
	}
	n := bodyPool
	if want := int(cfg.Rate*cfg.Duration.Seconds()) + 1; want < n {
		n = want
	}
	p := &payloads{deadlineMs: cfg.DeadlineMs, instances: cfg.InstancesPerRequest}
	for range n {
		p.bodies = append(p.bodies, g.Body(cfg.InstancesPerRequest, cfg.DeadlineMs))
	}
	return p, nil
}

// collector gathers per-request outcomes from the request goroutines.
type collector struct {
	mu          sync.Mutex
	corrected   *samples
	uncorrected *samples
	server      *samples
	byStatus    map[int]int
	byCode      map[string]int
	transport   map[string]int
	answered    int
	ok, good    int
	lastEnd     time.Time
	observe     func(Outcome) // Config.Observe, called under mu
	start       time.Time     // the run's start (Outcome.At counts from it)
}

func run(ctx context.Context, client *http.Client, cfg Config, p *payloads) Result {
	res := Result{
		Model: cfg.Model, Server: cfg.Server, Arrivals: cfg.Arrivals,
		InstancesPerRequest: p.instances, DeadlineMs: p.deadlineMs,
		Duration: cfg.Duration, OfferedRate: cfg.Rate,
	}
	warn := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		res.Warnings = append(res.Warnings, msg)
	}
	sched, err := NewSchedule(cfg.Arrivals, cfg.Rate, cfg.Seed)
	if err != nil { // checked by cfg.check; kept for safety
		warn("%v", err)
		return res
	}
	col := &collector{
		observe:     cfg.Observe,
		start:       time.Now(),
		corrected:   newSamples(cfg.MaxSamples, cfg.Seed+1),
		uncorrected: newSamples(cfg.MaxSamples, cfg.Seed+2),
		server:      newSamples(cfg.MaxSamples, cfg.Seed+4),
		byStatus:    map[int]int{},
		byCode:      map[string]int{},
		transport:   map[string]int{},
	}
	lag := newSamples(cfg.MaxSamples, cfg.Seed+3)
	target := predictURL(cfg.Server, cfg.Model)
	deadline := time.Duration(p.deadlineMs) * time.Millisecond
	sem := make(chan struct{}, cfg.Concurrency)
	var wg sync.WaitGroup
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	t0 := col.start
	tag := strconv.FormatInt(t0.UnixNano()%(1<<40), 36)
	col.lastEnd = t0

loop:
	for i := 0; ; i++ {
		off := sched.Next()
		if off >= cfg.Duration {
			break
		}
		intended := t0.Add(off)
		if !waitUntil(ctx, intended, timer) {
			res.Interrupted = true
			break loop
		}
		res.Scheduled++
		lag.add(time.Since(intended))
		select {
		case sem <- struct{}{}:
		default:
			res.DroppedByGenerator++
			if res.DroppedByGenerator == 1 && cfg.Warnf != nil {
				cfg.Warnf("bench: %d requests in flight (the --concurrency cap); dropping arrivals until some finish", cfg.Concurrency)
			}
			continue
		}
		res.Sent++
		wg.Add(1)
		body := p.bodies[i%len(p.bodies)]
		o := Outcome{Index: i, Model: cfg.Model, At: off}
		url := target
		if cfg.Route != nil {
			o.Model = cfg.Route(i)
			url = predictURL(cfg.Server, o.Model)
		}
		go func(o Outcome, url string, intended time.Time) {
			defer wg.Done()
			defer func() { <-sem }()
			col.do(ctx, client, cfg, url, tag+"-"+strconv.Itoa(o.Index), body, intended, deadline, o)
		}(o, url, intended)
	}
	window := cfg.Duration
	if res.Interrupted {
		window = time.Since(t0)
	}
	wg.Wait()

	res.Elapsed = max(window, col.lastEnd.Sub(t0))
	res.Answered, res.OK, res.Good = col.answered, col.ok, col.good
	res.ByStatus, res.ByCode = col.byStatus, col.byCode
	for _, n := range col.transport {
		res.TransportErrors += n
	}
	if len(col.transport) > 0 {
		res.TransportByReason = col.transport
	}
	res.Latency = col.corrected.percentiles()
	res.Uncorrected = col.uncorrected.percentiles()
	res.ServerLatency = col.server.percentiles()
	res.DispatchLag = lag.percentiles()
	if s := window.Seconds(); s > 0 {
		res.SendRate = float64(res.Sent) / s
	}
	if s := res.Elapsed.Seconds(); s > 0 {
		res.AchievedRate = float64(res.Answered) / s
		res.Goodput = float64(res.Good) / s
	}

	if res.Interrupted {
		warn("interrupted after %v; the numbers cover only that part of the run", window.Round(time.Millisecond))
	}
	if res.DroppedByGenerator > 0 {
		res.FellBehind = true
		warn("%d of %d arrivals (%.1f%%) were dropped by the generator because %d requests were already in flight (--concurrency); the server did not keep up and less than the target load was offered",
			res.DroppedByGenerator, res.Scheduled, 100*float64(res.DroppedByGenerator)/float64(max(res.Scheduled, 1)), cfg.Concurrency)
	}
	if res.DispatchLag.P99 > LagWarning {
		res.FellBehind = true
		warn("the generator fell behind its schedule: dispatch lag p99 %v, max %v (over %v); this machine may be too busy for %g requests/s. Corrected latencies still count from the intended times",
			fmtDur(res.DispatchLag.P99), fmtDur(res.DispatchLag.Max), LagWarning, cfg.Rate)
	}
	if res.TransportErrors > 0 {
		warn("%d requests got no HTTP answer (%s)", res.TransportErrors, fmtCounts(col.transport))
	}
	return res
}

// ServerTotal is the "total" entry of a Server-Timing header
// ("preprocess;dur=0.012, …, total;dur=1.234", milliseconds), and whether
// there was one.
func ServerTotal(h string) (time.Duration, bool) {
	for _, part := range strings.Split(h, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if name != "total" {
			continue
		}
		for _, p := range strings.Split(params, ";") {
			if v, ok := strings.CutPrefix(strings.TrimSpace(p), "dur="); ok {
				ms, err := strconv.ParseFloat(v, 64)
				if err != nil || ms < 0 || math.IsNaN(ms) || math.IsInf(ms, 0) {
					return 0, false
				}
				return time.Duration(ms * float64(time.Millisecond)), true
			}
		}
	}
	return 0, false
}

// coarseWait is the part of a wait left to the (interruptible, but only
// millisecond-precise) runtime timer; the last stretch uses fineSleep.
const coarseWait = 2 * time.Millisecond

// waitUntil waits until t; it returns false if ctx ends first.
func waitUntil(ctx context.Context, t time.Time, timer *time.Timer) bool {
	for {
		if ctx.Err() != nil {
			return false
		}
		d := time.Until(t)
		switch {
		case d <= 0:
			return true
		case d > coarseWait:
			timer.Reset(d - coarseWait)
			select {
			case <-ctx.Done():
				timer.Stop()
				return false
			case <-timer.C:
			}
		default:
			fineSleep(d)
		}
	}
}

// do sends one request and records its outcome.
func (c *collector) do(ctx context.Context, client *http.Client, cfg Config, target, id string, body []byte, intended time.Time, deadline time.Duration, o Outcome) {
	rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	var gotConn atomic.Int64 // unix nanos; 0 until a connection is had
	rctx = httptrace.WithClientTrace(rctx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { gotConn.Store(time.Now().UnixNano()) },
	})
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		c.fail("request", o, intended)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Request-Id", "bench-"+id)
	if cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+cfg.APIKey)
	}
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		c.fail(reason(ctx, err), o, intended)
		return
	}
	code := ""
	if resp.StatusCode/100 == 2 {
		_, err = io.Copy(io.Discard, resp.Body)
	} else {
		var b []byte
		b, err = io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		code, _ = parseError(b)
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	}
	resp.Body.Close()
	end := time.Now()
	if err != nil {
		c.fail(reason(ctx, err), o, intended)
		return
	}
	sent := start
	if n := gotConn.Load(); n != 0 {
		sent = time.Unix(0, n)
	}
	corrected := end.Sub(intended)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.answered++
	c.byStatus[resp.StatusCode]++
	if code != "" {
		c.byCode[code]++
	}
	if resp.StatusCode/100 == 2 {
		if d, ok := ServerTotal(resp.Header.Get("Server-Timing")); ok {
			c.server.add(d)
		}
		c.ok++
		if deadline == 0 || corrected <= deadline {
			c.good++
		}
	}
	c.corrected.add(corrected)
	c.uncorrected.add(end.Sub(sent))
	if end.After(c.lastEnd) {
		c.lastEnd = end
	}
	if c.observe != nil {
		o.Latency, o.Status, o.Code = corrected, resp.StatusCode, code
		c.observe(o)
	}
}

func (c *collector) fail(why string, o Outcome, intended time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.transport[why]++
	now := time.Now()
	if now.After(c.lastEnd) {
		c.lastEnd = now
	}
	if c.observe != nil {
		o.Latency, o.Code = now.Sub(intended), why
		c.observe(o)
	}
}

// reason classifies an error that left a request without an HTTP answer.
func reason(parent context.Context, err error) string {
	var ne net.Error
	switch {
	case parent.Err() != nil:
		return "interrupted"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE):
		return "too_many_open_files"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	case errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "connection_reset"
	case errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	default:
		return "other"
	}
}
