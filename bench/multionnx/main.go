// Command multionnx measures issue 23's multi-input batching figure:
// rows/s of a variable-length text batch (seq -min..-max tokens, uniform)
// through the real binary on examples/text (an ONNX model of two inputs,
// input_ids and attention_mask int64 [batch, seq]), with batching on
// (maxBatchSize 32, maxBatchDelay 2ms, lengthBuckets 16/32/64/128: the
// batcher merges rows of similar length and pads them, ids with padValue,
// the mask with 0) against batching off (maxBatchSize 1: every row its own
// ONNX Runtime call, as a server that batches equal shapes only must run
// rows of different lengths a client did not pad).
//
// It starts `sluice serve` itself, pinned with taskset to -server-cpus,
// with both packages (text-on, text-off: the same artifact) loaded at
// once, and is itself the load generator: a closed loop of -conc calls in
// flight, each a /v1 predict of -rows rows (several values: one figure
// each). Windows alternate between the two packages, the order flipping
// every round; each package's rows/s is the median of -rounds windows.
// Before measuring it checks that both packages answer the same rows with
// the same outputs (within 1e-5). The load average is logged at every
// window, since the machine may be shared.
//
//	go build -o /tmp/multionnx/sluice ./cmd/sluice && go build -o /tmp/multionnx/bench ./bench/multionnx
//	nice -n -5 taskset -c 1 /tmp/multionnx/bench -sluice /tmp/multionnx/sluice \
//	    -lib "$(bash scripts/fetch-onnxruntime.sh | tail -1)" -server-cpus 0 -rows 1,16 -rounds 5
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

var (
	bin       = flag.String("sluice", "/tmp/multionnx/sluice", "the sluice binary")
	lib       = flag.String("lib", os.Getenv("SLUICE_ONNXRUNTIME_LIB"), "ONNX Runtime's libonnxruntime.so.1")
	example   = flag.String("example", "examples/text", "the package to serve (its model.yaml's serving: section is replaced)")
	outDir    = flag.String("out", "/tmp/multionnx/out", "models, data, server log and results.json")
	serverCPU = flag.String("server-cpus", "0", "taskset -c list for the server")
	rounds    = flag.Int("rounds", 5, "windows per package and row count (interleaved)")
	window    = flag.Duration("window", 8*time.Second, "a measuring window")
	warm      = flag.Duration("warm", time.Second, "load before each window, not counted")
	conc      = flag.Int("conc", 32, "calls in flight (closed loop)")
	rowsList  = flag.String("rows", "1,16", "rows per request, comma-separated: one figure each")
	minLen    = flag.Int("min", 8, "shortest row (tokens)")
	maxLen    = flag.Int("max", 128, "longest row (tokens)")
	vocab     = flag.Int("vocab", 1000, "token ids are drawn from 1..vocab-1")
	seed      = flag.Uint64("seed", 23, "seed of the rows")
	deadline  = flag.Int("deadline-ms", 60000, "deadlineMs of every call: long, so that calls wait rather than fail and rows/s is throughput")
)

var hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, MaxConnsPerHost: 1024}, Timeout: 60 * time.Second}

const servingOn = `serving:
  maxBatchSize: 32
  maxBatchDelay: 2ms
  lengthBuckets: [16, 32, 64, 128]
  padValue: 0
  maxQueueInstances: 4096
`

const servingOff = `serving:
  maxBatchSize: 1
  maxBatchDelay: 0ms
  padValue: 0
  maxQueueInstances: 4096
`

// writePackage copies the example as name with the given serving: section.
func writePackage(models, name, serving string) {
	src, err := os.ReadFile(filepath.Join(*example, "model.yaml"))
	must(err)
	art, err := os.ReadFile(filepath.Join(*example, "model.onnx"))
	must(err)
	y := string(src)
	i, j := strings.Index(y, "\nserving:\n"), strings.Index(y, "\ngolden:\n")
	if i < 0 || j < i {
		log.Fatalf("%s/model.yaml: no serving: section before golden:", *example)
	}
	y = strings.Replace(y[:i+1]+serving+y[j+1:], "name: text\n", "name: "+name+"\n", 1)
	dir := filepath.Join(models, name)
	must(os.MkdirAll(dir, 0o755))
	must(os.WriteFile(filepath.Join(dir, "model.yaml"), []byte(y), 0o644))
	must(os.WriteFile(filepath.Join(dir, "model.onnx"), art, 0o644))
}

// bodies are -n request bodies of rows rows each, lengths uniform in
// -min..-max, the mask all ones (a client's rows, never padded).
func bodies(n, rows int, rng *rand.Rand) ([][]byte, float64) {
	out := make([][]byte, n)
	total := 0
	for b := range out {
		insts := make([]map[string][]int, rows)
		for r := range insts {
			l := *minLen + rng.IntN(*maxLen-*minLen+1)
			total += l
			ids, mask := make([]int, l), make([]int, l)
			for k := range ids {
				ids[k], mask[k] = 1+rng.IntN(*vocab-1), 1
			}
			insts[r] = map[string][]int{"input_ids": ids, "attention_mask": mask}
		}
		out[b], _ = json.Marshal(map[string]any{"instances": insts, "deadlineMs": *deadline})
	}
	return out, float64(total) / float64(n*rows)
}

func predict(url string, body []byte) ([]map[string]float64, error) {
	resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("%d %s", resp.StatusCode, b)
	}
	var p struct{ Predictions []map[string]float64 }
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	return p.Predictions, nil
}

// closedLoop keeps -conc calls in flight for d and returns rows/s and the
// calls that failed (the first failure is logged).
func closedLoop(url string, bs [][]byte, rows int, d time.Duration) (float64, int64) {
	var ok, failed atomic.Int64
	var once sync.Once
	var next atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for range *conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				b := bs[int(next.Add(1))%len(bs)]
				if _, err := predict(url, b); err != nil {
					failed.Add(1)
					once.Do(func() { log.Printf("%s: a call failed: %.300v", url, err) })
					continue
				}
				ok.Add(int64(rows))
			}
		}()
	}
	wg.Wait()
	return float64(ok.Load()) / time.Since(start).Seconds(), failed.Load()
}

// cpuSeconds is the user + system CPU time of process pid and its threads
// so far (/proc/PID/stat utime and stime, in clock ticks of 1/100 s).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return math.NaN()
	}
	// The command may hold spaces: the fields after it follow the last ')'.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	defer ln.Close()
	return ln.Addr().String()
}

type window1 struct {
	Package string  `json:"package"`
	Rows    int     `json:"rowsPerRequest"`
	Round   int     `json:"round"`
	RowsPS  float64 `json:"rowsPerSecond"`
	// RowsPerCPU is rows per CPU-second of the server: what one core of
	// its own would serve, whatever else runs on the machine.
	RowsPerCPU float64 `json:"rowsPerServerCPUSecond"`
	Failed     int64   `json:"failedCalls"`
	Load       string  `json:"loadavgBefore"`
}

func main() {
	flag.Parse()
	if *lib == "" {
		log.Fatal("-lib (or SLUICE_ONNXRUNTIME_LIB) must name libonnxruntime.so.1: bash scripts/fetch-onnxruntime.sh prints it")
	}
	var rowCounts []int
	for _, s := range strings.Split(*rowsList, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			log.Fatalf("-rows: %q is not a positive count", s)
		}
		rowCounts = append(rowCounts, n)
	}
	must(os.RemoveAll(*outDir))
	models := filepath.Join(*outDir, "models")
	writePackage(models, "text-on", servingOn)
	writePackage(models, "text-off", servingOff)

	addr := freeAddr()
	lf, err := os.Create(filepath.Join(*outDir, "server.log"))
	must(err)
	cmd := exec.Command("taskset", "-c", *serverCPU, *bin, "serve", "--addr", addr, "--data", filepath.Join(*outDir, "data"),
		"--models", models, "--onnxruntime-lib", *lib, "--no-records")
	cmd.Stdout, cmd.Stderr = lf, lf
	must(cmd.Start())
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	base := "http://" + addr
	ready := false
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := predict(base+"/v1/models/text-off:predict", []byte(`{"instances":[{"input_ids":[1],"attention_mask":[1]}]}`)); err == nil {
			if _, err := predict(base+"/v1/models/text-on:predict", []byte(`{"instances":[{"input_ids":[1],"attention_mask":[1]}]}`)); err == nil {
				ready = true
				break
			}
		}
	}
	if !ready {
		log.Fatalf("the server did not serve both packages within 60 s; see %s", lf.Name())
	}
	url := func(pkg string) string { return base + "/v1/models/" + pkg + ":predict" }

	rng := rand.New(rand.NewPCG(*seed, 1))
	type set struct {
		rows    int
		bodies  [][]byte
		meanLen float64
	}
	var sets []set
	for _, n := range rowCounts {
		bs, ml := bodies(max(64, 4096/n), n, rng)
		sets = append(sets, set{n, bs, ml})
	}
	// Both packages give the same outputs for the same rows.
	for _, s := range sets {
		for _, b := range s.bodies[:8] {
			on, err1 := predict(url("text-on"), b)
			off, err2 := predict(url("text-off"), b)
			if err1 != nil || err2 != nil || len(on) != len(off) {
				log.Fatalf("check: %v %v", err1, err2)
			}
			for i := range on {
				for k, v := range on[i] {
					if math.Abs(v-off[i][k]) > 1e-5 {
						log.Fatalf("check: row %d %s: batched %v, unbatched %v", i, k, v, off[i][k])
					}
				}
			}
		}
	}

	var all []window1
	for r := range *rounds {
		for _, s := range sets {
			order := []string{"text-off", "text-on"}
			if r%2 == 1 {
				order = []string{"text-on", "text-off"}
			}
			for _, pkg := range order {
				closedLoop(url(pkg), s.bodies, s.rows, *warm)
				w := window1{Package: pkg, Rows: s.rows, Round: r, Load: loadavg()}
				c0, t0 := cpuSeconds(cmd.Process.Pid), time.Now()
				w.RowsPS, w.Failed = closedLoop(url(pkg), s.bodies, s.rows, *window)
				cpu := cpuSeconds(cmd.Process.Pid) - c0
				w.RowsPerCPU = w.RowsPS * time.Since(t0).Seconds() / cpu
				log.Printf("round %d rows/request %d %-8s %9.0f rows/s, %9.0f rows per server CPU-second (server CPU %.0f %%; %d failed calls; loadavg before %s)",
					r, s.rows, pkg, w.RowsPS, w.RowsPerCPU, 100*cpu/time.Since(t0).Seconds(), w.Failed, w.Load)
				all = append(all, w)
			}
		}
	}
	fmt.Printf("\nmulti-input batching, examples/text, rows of %d-%d tokens, %d calls in flight, server on cpus %s, %d rounds of %v\n\n",
		*minLen, *maxLen, *conc, *serverCPU, *rounds, *window)
	fmt.Println("| rows per request | mean tokens | batching off rows/s (median) | batching on rows/s (median) | on / off | off, rows per server CPU-s | on, rows per server CPU-s | on / off |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	type summary struct {
		Rows     int     `json:"rowsPerRequest"`
		MeanLen  float64 `json:"meanTokens"`
		Off, On  float64 `json:"-"`
		OffMed   float64 `json:"offMedianRowsPerSecond"`
		OnMed    float64 `json:"onMedianRowsPerSecond"`
		Ratio    float64 `json:"ratio"`
		OffCPU   float64 `json:"offMedianRowsPerServerCPUSecond"`
		OnCPU    float64 `json:"onMedianRowsPerServerCPUSecond"`
		RatioCPU float64 `json:"ratioPerServerCPUSecond"`
	}
	var sums []summary
	for _, s := range sets {
		var on, off, onC, offC []float64
		for _, w := range all {
			if w.Rows != s.rows {
				continue
			}
			if w.Package == "text-on" {
				on, onC = append(on, w.RowsPS), append(onC, w.RowsPerCPU)
			} else {
				off, offC = append(off, w.RowsPS), append(offC, w.RowsPerCPU)
			}
		}
		sm := summary{Rows: s.rows, MeanLen: s.meanLen, OffMed: median(off), OnMed: median(on), OffCPU: median(offC), OnCPU: median(onC)}
		sm.Ratio, sm.RatioCPU = sm.OnMed/sm.OffMed, sm.OnCPU/sm.OffCPU
		sums = append(sums, sm)
		fmt.Printf("| %d | %.1f | %.0f (%s) | %.0f (%s) | %.2fx | %.0f (%s) | %.0f (%s) | %.2fx |\n", s.rows, s.meanLen,
			sm.OffMed, list(off), sm.OnMed, list(on), sm.Ratio, sm.OffCPU, list(offC), sm.OnCPU, list(onC), sm.RatioCPU)
	}
	out, _ := json.MarshalIndent(map[string]any{"windows": all, "summary": sums, "conc": *conc, "window": window.String(), "rounds": *rounds}, "", " ")
	must(os.WriteFile(filepath.Join(*outDir, "results.json"), out, 0o644))
}

func list(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'f', 0, 64)
	}
	return strings.Join(s, " / ")
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
