package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluiceml/sluice/internal/oip/inferencepb"
	"github.com/sluiceml/sluice/internal/pgdb/pgtest"
	"github.com/sluiceml/sluice/internal/testwait"
)

// The feature e2e tests need Debian's redis-server and a PostgreSQL (make
// test-features starts it and sets SLUICE_TEST_FEATURES=1); make test
// skips them.
func needFeatures(t *testing.T) {
	t.Helper()
	if os.Getenv("SLUICE_TEST_FEATURES") == "" {
		t.Skip("needs redis-server and PostgreSQL: make test-features runs it (SLUICE_TEST_FEATURES=1)")
	}
}

// redisProc is a redis-server of the test's own (it may be stopped and
// killed), on a fixed 127.0.0.1 port so a restart is found again.
type redisProc struct {
	port int
	dir  string
	cmd  *exec.Cmd
}

func startRedis(t *testing.T, port int, dir string) *redisProc {
	t.Helper()
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	if dir == "" {
		dir = t.TempDir()
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v (scripts/start-redis.sh installs it)", err)
	}
	r := &redisProc{port: port, dir: dir, cmd: cmd}
	t.Cleanup(func() { r.kill() })
	testwait.Until(t, 10*time.Second, func() bool { return r.cli(t, "PING") == "PONG" })
	return r
}

func (r *redisProc) kill() {
	if r.cmd.ProcessState == nil {
		r.cmd.Process.Signal(syscall.SIGCONT)
		r.cmd.Process.Kill()
		r.cmd.Wait()
	}
}

func (r *redisProc) url() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

// cli runs redis-cli against the server ("" when it does not answer).
func (r *redisProc) cli(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "redis-cli", append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(r.port)}, args...)...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// featureAnswer is the part of a /v1 answer these tests read.
type featureAnswer struct {
	Predictions    []map[string]float64 `json:"predictions"`
	FeatureSources []map[string]string  `json:"featureSources"`
}

func predictFeatures(t *testing.T, url, body string) (int, featureAnswer, string) {
	t.Helper()
	a, err := postRaw(t, url, body, nil)
	if err != nil {
		return 0, featureAnswer{}, err.Error()
	}
	var fa featureAnswer
	json.Unmarshal(a.body, &fa)
	return a.status, fa, string(a.body)
}

// seedPostgres makes the fraud-features example's table in a fresh schema
// and returns the URL whose search_path is that schema.
func seedPostgres(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	url := pgtest.URL(t)
	ctx := t.Context()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, `CREATE TABLE card_stats ("cardId" text PRIMARY KEY, "accountAgeDays" bigint, "declines5m" bigint, updated_at timestamptz)`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `INSERT INTO card_stats VALUES ('d1', 2400, 0, now()), ('dold', 2400, 0, now() - interval '1 hour'), ('dwarm', 1, 1, now())`); err != nil {
		t.Fatal(err)
	}
	return url, conn
}

// TestFeaturesTiers runs examples/features/fraud-features through the real binary
// with a real Redis and PostgreSQL: values from each tier, the caller's
// values winning, defaults for unknown cards, stale values flagged, a
// database hit filling Redis (read-through), the record keeping the
// enrichment, OIP REST and the CLI showing the sources; and the same
// model refusing to load on a server without a feature store.
func TestFeaturesTiers(t *testing.T) {
	needFeatures(t)
	r := startRedis(t, 0, "")
	now := strconv.FormatInt(time.Now().Unix(), 10)
	r.cli(t, "HSET", "card_stats:r1", "accountAgeDays", "91", "declines5m", "3", "_ts", now)
	r.cli(t, "HSET", "card_stats:old", "accountAgeDays", "91", "declines5m", "3", "_ts", "1000")
	pg, _ := seedPostgres(t)
	gaddr := freeAddr(t)
	srv := startServer(t, "--data", t.TempDir(), "--models", "../../examples/features/fraud-features", "--features-redis", r.url(), "--features-postgres", pg, "--grpc-addr", gaddr)
	defer srv.stop(t)
	v1 := srv.url + "/v1/models/fraud-features:predict"
	warmDatabase(t, v1)

	status, a, body := predictFeatures(t, v1, `{"instances":[
		{"cardId":"r1","amount":800,"country":"US"},
		{"cardId":"d1","amount":12.5,"country":"GB"},
		{"cardId":"nobody","amount":250},
		{"cardId":"old","amount":800},
		{"cardId":"dold","amount":800,"declines5m":7},
		{"amount":800,"accountAgeDays":91,"declines5m":3,"country":"US"}]}`)
	if status != 200 || len(a.FeatureSources) != 6 {
		t.Fatalf("predict: %d %s", status, body)
	}
	want := []string{"redis redis", "database database", "default default", "stale stale", "stale request", "request request"}
	for i, w := range want {
		if got := a.FeatureSources[i]["accountAgeDays"] + " " + a.FeatureSources[i]["declines5m"]; got != w {
			t.Errorf("instance %d: sources %s, want %s (%s)", i, got, w, body)
		}
	}
	// The golden rows: the same values give the same scores whichever
	// tier they came from.
	if p := a.Predictions; p[0]["riskScore"] != p[5]["riskScore"] || p[0]["riskScore"] < 0.84 || p[0]["riskScore"] > 0.85 || p[1]["riskScore"] > 0.001 {
		t.Errorf("scores %v", p)
	}
	// Read-through: d1 is in Redis now, with its timestamp.
	testwait.Until(t, 5*time.Second, func() bool { return r.cli(t, "HGET", "card_stats:d1", "accountAgeDays") == "2400" })
	if ts := r.cli(t, "HGET", "card_stats:d1", "_ts"); ts == "" {
		t.Error("the read-through fill wrote no _ts")
	}
	// Again within the memory ttl (1s): memory. After it: d1 from Redis.
	_, a, body = predictFeatures(t, v1, `{"instances":[{"cardId":"r1","amount":1},{"cardId":"nobody","amount":1}]}`)
	if a.FeatureSources[0]["declines5m"] != "memory" || a.FeatureSources[1]["declines5m"] != "default" {
		t.Errorf("second call: %s", body)
	}
	testwait.Until(t, 5*time.Second, func() bool {
		_, a, _ := predictFeatures(t, v1, `{"instances":[{"cardId":"d1","amount":1}]}`)
		return len(a.FeatureSources) == 1 && a.FeatureSources[0]["declines5m"] == "redis"
	})

	// The record keeps the enrichment.
	testwait.Until(t, 10*time.Second, func() bool {
		resp, err := http.Get(srv.url + "/v1/records?model=fraud-features&limit=100")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var rs struct {
			Records []struct {
				Features json.RawMessage `json:"features"`
			} `json:"records"`
		}
		json.NewDecoder(resp.Body).Decode(&rs)
		for _, rc := range rs.Records {
			if strings.Contains(string(rc.Features), `{"entity":"d1","values":{"accountAgeDays":2400,"declines5m":0},"sources":{"accountAgeDays":"database","declines5m":"database"}}`) {
				return true
			}
		}
		return false
	})

	// OIP REST: the entity as a BYTES tensor; the sources as a parameter.
	oa, err := postRaw(t, srv.url+"/v2/models/fraud-features/infer", `{"inputs":[{"name":"cardId","datatype":"BYTES","shape":[1],"data":["r1"]},{"name":"amount","datatype":"FP32","shape":[1],"data":[800]}]}`, nil)
	if err != nil || oa.status != 200 || !strings.Contains(string(oa.body), `"feature_sources":"[{\"accountAgeDays\":\"`) {
		t.Errorf("OIP REST: %v %d %s", err, oa.status, oa.body)
	}

	if info := getBody(t, srv.url+"/v1/models/fraud-features"); !strings.Contains(info, `"enrichment":{"entity":"cardId","entityType":"string","view":"card_stats","fields":["accountAgeDays","declines5m"]`) {
		t.Errorf("GET /v1/models/fraud-features lacks the enrichment: %s", info)
	}
	if md := getBody(t, srv.url+"/v2/models/fraud-features"); !strings.Contains(md, `{"name":"cardId","datatype":"BYTES","shape":[-1]}`) {
		t.Errorf("OIP metadata lacks the entity input: %s", md)
	}

	// OIP gRPC: the same, as the response parameter feature_sources.
	conn, err := grpc.NewClient(gaddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	gctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	gresp, err := inferencepb.NewGRPCInferenceServiceClient(conn).ModelInfer(gctx, &inferencepb.ModelInferRequest{ModelName: "fraud-features", Inputs: []*inferencepb.ModelInferRequest_InferInputTensor{
		{Name: "cardId", Datatype: "BYTES", Shape: []int64{2}, Contents: &inferencepb.InferTensorContents{BytesContents: [][]byte{[]byte("nobody"), []byte("r1")}}},
		{Name: "amount", Datatype: "FP32", Shape: []int64{2}, Contents: &inferencepb.InferTensorContents{Fp32Contents: []float32{800, 800}}},
	}})
	if err != nil {
		t.Fatalf("OIP gRPC: %v", err)
	}
	if fs := gresp.Parameters["feature_sources"].GetStringParam(); !strings.HasPrefix(fs, `[{"accountAgeDays":"default","declines5m":"default"},{"accountAgeDays":"`) {
		t.Errorf("OIP gRPC feature_sources %q", fs)
	}

	// The CLI says where each instance's features came from.
	_, stderr, err := sluice(t, "predict", "--server", srv.url, "fraud-features", `{"cardId":"nobody","amount":5}`)
	if err != nil || !strings.Contains(stderr, "features[0]: accountAgeDays=default declines5m=default") {
		t.Errorf("sluice predict: %v, stderr %q", err, stderr)
	}

	// An instance with no entity and not every field: refused, naming it.
	status, _, body = predictFeatures(t, v1, `{"instances":[{"amount":1}]}`)
	if status != 400 || !strings.Contains(body, `"field":"instances[0].cardId"`) {
		t.Errorf("no entity: %d %s", status, body)
	}
	metrics := getBody(t, srv.url+"/metrics")
	for _, m := range []string{`sluice_feature_lookups_total{result="hit",tier="redis",view="card_stats"}`, `sluice_feature_lookups_total{result="hit",tier="database",view="card_stats"}`,
		`sluice_feature_lookups_total{result="hit",tier="memory",view="card_stats"}`, `sluice_feature_values_total{origin="default",view="card_stats"}`,
		`sluice_feature_values_total{origin="stale",view="card_stats"}`, `sluice_feature_breaker_open{store="redis"} 0`, `sluice_feature_lookup_seconds_bucket{tier="redis",view="card_stats",le=`} {
		if !strings.Contains(metrics, m) {
			t.Errorf("metrics lack %s", m)
		}
	}

	// Without --features-*: the version refuses to load, saying why.
	plain := startServer(t, "--data", t.TempDir(), "--models", "../../examples/features/fraud-features")
	defer plain.stop(t)
	testwait.Until(t, 10*time.Second, func() bool { return strings.Contains(plain.logs.String(), "has no feature store") })
	if !strings.Contains(plain.logs.String(), "--features-redis") {
		t.Errorf("the refusal does not name the flags:\n%s", plain.logs)
	}
	status, _, body = predictFeatures(t, plain.url+"/v1/models/fraud-features:predict", `{"instances":[{"cardId":"r1","amount":1}]}`)
	if status == 200 {
		t.Errorf("a server without feature stores answered: %s", body)
	}
}

func getBody(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

// TestFeaturesRedisStoppedAndKilled: under load, Redis is stopped
// (SIGSTOP) for two seconds: every answer is a 200 within its deadline
// (defaults or the database's values), none is a 5xx; then Redis is
// killed and started again on its port: values come from Redis again once
// the breaker's probe finds it.
func TestFeaturesRedisStoppedAndKilled(t *testing.T) {
	needFeatures(t)
	r := startRedis(t, 0, "")
	pg, conn := seedPostgres(t)
	if _, err := conn.Exec(t.Context(), `INSERT INTO card_stats SELECT 'p' || i, i, 1, now() FROM generate_series(0, 99999) AS i`); err != nil {
		t.Fatal(err)
	}
	srv := startServer(t, "--data", t.TempDir(), "--models", "../../examples/features/fraud-features", "--features-redis", r.url(), "--features-postgres", pg, "--no-records")
	defer srv.stop(t)
	v1 := srv.url + "/v1/models/fraud-features:predict"
	warmDatabase(t, v1)

	var n, ok, fivexx, other atomic.Int64
	var bad sync.Once
	var badBody string
	var seq atomic.Int64
	origins := sync.Map{} // origin -> *atomic.Int64
	count := func(o string) {
		v, _ := origins.LoadOrStore(o, new(atomic.Int64))
		v.(*atomic.Int64).Add(1)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				i := seq.Add(1)
				body := fmt.Sprintf(`{"instances":[{"cardId":"p%d","amount":10},{"cardId":"r%d","amount":10}],"deadlineMs":100}`, i%100000, i)
				resp, err := http.Post(v1, "application/json", strings.NewReader(body))
				if err != nil {
					other.Add(1)
					continue
				}
				var fa featureAnswer
				raw, _ := io.ReadAll(resp.Body)
				json.Unmarshal(raw, &fa)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					bad.Do(func() { badBody = fmt.Sprintf("%d %s", resp.StatusCode, raw) })
				}
				n.Add(1)
				switch {
				case resp.StatusCode == 200:
					ok.Add(1)
					for _, s := range fa.FeatureSources {
						count(s["declines5m"])
					}
				case resp.StatusCode >= 500:
					fivexx.Add(1)
				default:
					other.Add(1)
				}
			}
		}()
	}
	time.Sleep(time.Second)
	r.cmd.Process.Signal(syscall.SIGSTOP)
	time.Sleep(2 * time.Second)
	r.cmd.Process.Signal(syscall.SIGCONT)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	var summary []string
	origins.Range(func(k, v any) bool {
		summary = append(summary, fmt.Sprintf("%s=%d", k, v.(*atomic.Int64).Load()))
		return true
	})
	t.Logf("SIGSTOP for 2s under load: %d answers, %d ok, %d 5xx, %d other; declines5m origins %v; first refusal: %s", n.Load(), ok.Load(), fivexx.Load(), other.Load(), summary, badBody)
	if fivexx.Load() != 0 || other.Load() != 0 || ok.Load() == 0 || ok.Load() != n.Load() {
		t.Errorf("with Redis stopped: %d answers, %d ok, %d 5xx, %d other; want every one 200", n.Load(), ok.Load(), fivexx.Load(), other.Load())
	}

	// Killed, then started again on the same port: the breaker opens
	// (requests skip Redis), its probe finds the new server, values flow.
	r.kill()
	for i := range 10 {
		predictFeatures(t, v1, fmt.Sprintf(`{"instances":[{"cardId":"k%d","amount":1}]}`, i))
	}
	testwait.Until(t, 5*time.Second, func() bool {
		return strings.Contains(getBody(t, srv.url+"/metrics"), `sluice_feature_breaker_open{store="redis"} 1`)
	})
	r2 := startRedis(t, r.port, r.dir)
	r2.cli(t, "HSET", "card_stats:back", "accountAgeDays", "5", "declines5m", "2")
	back := time.Now()
	testwait.Until(t, 10*time.Second, func() bool {
		_, a, _ := predictFeatures(t, v1, `{"instances":[{"cardId":"back","amount":1}]}`)
		return len(a.FeatureSources) == 1 && a.FeatureSources[0]["declines5m"] == "redis"
	})
	t.Logf("Redis restarted: values from Redis again %s after it answered", time.Since(back).Round(time.Millisecond))
}

// warmDatabase waits until the database answers within a request's
// budget: the first lookup of a view reads its columns (apart from the
// request, which may get its defaults meanwhile).
func warmDatabase(t *testing.T, v1 string) {
	t.Helper()
	testwait.Until(t, 10*time.Second, func() bool {
		_, a, _ := predictFeatures(t, v1, `{"instances":[{"cardId":"dwarm","amount":1}]}`)
		return len(a.FeatureSources) == 1 && a.FeatureSources[0]["declines5m"] == "database"
	})
}
