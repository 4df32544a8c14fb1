// Command jobs measures the goals of issue 20 (batch prediction jobs)
// against the real binary: it starts `sluice serve` itself, pinned to
// core 0 (taskset -c 0), and is itself the load generator (run it pinned
// to core 1). Figures, each over -runs runs, medians reported:
//
//	a  a -rows JSONL job with the fraud example: rows/s from submit to
//	   succeeded, against the same rows sent as 1,000-row /v1 requests by
//	   a client loop (one request in flight), interleaved run by run
//	b  online p99 of 1-row fraud calls (open loop, poisson, latency from
//	   the intended send time) at -load × capacity with a job running vs
//	   without; capacity is measured first (closed loop, -conc in flight)
//	c  the job's rows/s during that online load ÷ the idle capacity left
//	   to it: its rows/s alone × (1 − online rate ÷ capacity)
//	d  kill -9 of the server mid-job, restart on the same --data: rowsRedone
//	e  duplicate and missing ids in that job's output
//	f  server RSS (VmRSS) while a -big-bytes CSV streams, above idle
//
// Every figure goes to OUT/results.json and a summary to stdout.
//
//	go build -o /tmp/jobsbench/jobs ./bench/jobs && go build -o /tmp/jobsbench/sluice ./cmd/sluice
//	nice -n -10 taskset -c 1 /tmp/jobsbench/jobs -sluice /tmp/jobsbench/sluice -out /tmp/jobsbench/out
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"math/rand/v2"
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

	"github.com/sluiceml/sluice/internal/api"
)

var (
	bin       = flag.String("sluice", "/tmp/jobsbench/sluice", "the sluice binary")
	outDir    = flag.String("out", "/tmp/jobsbench/out", "results, logs and inputs")
	addr      = flag.String("addr", "127.0.0.1:18190", "server address")
	pprofAddr = flag.String("pprof-addr", "127.0.0.1:18191", "server's --pprof-addr")
	serverCPU = flag.String("server-cpus", "0", "taskset -c list for the server")
	rowsA     = flag.Int("rows", 1_000_000, "rows of the JSONL input of figures a, d, e")
	rowsB     = flag.Int("rows-b", 4_000_000, "rows of the JSONL input of figures b, c (the job must outlast two windows)")
	runs      = flag.Int("runs", 3, "runs of each figure")
	window    = flag.Duration("window", 8*time.Second, "a measuring window of figures b, c")
	conc      = flag.Int("conc", 8, "closed-loop calls in flight when measuring capacity")
	loadShare = flag.Float64("load", 0.5, "online rate as a share of capacity")
	bigBytes  = flag.Int64("big-bytes", 10<<30, "size of figure f's CSV input")
	bigPad    = flag.Int("big-pad", 1000, "bytes of the ignored note column per row of figure f's CSV")
	bigFor    = flag.Duration("big-for", 4*time.Minute, "figure f: watch the job at most this long, then cancel it")
	dKs       = flag.String("d-chunks-in-flight", "2,1", "figure d: each run kills one job per --job-chunks-in-flight value of this list")
	only      = flag.String("only", "abdf", "figures to run: a, b (with c), d (with e), f")
	genOnly   = flag.Bool("gen-only", false, "write the inputs of -only's figures and exit (to make them before the machine is quiet)")
	profile   = flag.Bool("profile", true, "after figure b: a CPU profile of the server during one more job + online window")
)

var hc = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512}, Timeout: 60 * time.Second}

func base() string { return "http://" + *addr }

// ---- inputs ----

func rowFields(i int) (float64, int, int, string) {
	return float64(i%5000)*0.37 + 1, i % 3650, i % 6, [...]string{"US", "GB", "DE"}[i%3]
}

func instance(i int) string {
	a, age, d, c := rowFields(i)
	return fmt.Sprintf(`{"amount":%s,"accountAgeDays":%d,"declines5m":%d,"country":%q}`, strconv.FormatFloat(a, 'g', -1, 64), age, d, c)
}

func writeJSONL(path string, n int) error {
	if st, err := os.Stat(path); err == nil && st.Size() > 0 {
		return nil // made by an earlier run: same rows
	}
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := 0; i < n; i++ {
		a, age, d, c := rowFields(i)
		fmt.Fprintf(w, `{"id":"r%08d","amount":%s,"accountAgeDays":%d,"declines5m":%d,"country":%q}`+"\n", i, strconv.FormatFloat(a, 'g', -1, 64), age, d, c)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(path+".tmp", path)
}

// writeBigCSV writes rows with a note column (not in the schema: the
// reader skips it) of pad bytes until the file holds size bytes.
func writeBigCSV(path string, size int64, pad int) (int64, error) {
	if st, err := os.Stat(path); err == nil && st.Size() >= size {
		return st.Size(), nil
	}
	f, err := os.Create(path + ".tmp")
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 4<<20)
	note := strings.Repeat("x", pad)
	n, _ := w.WriteString("id,amount,accountAgeDays,declines5m,country,note\n")
	total := int64(n)
	for i := 0; total < size; i++ {
		a, age, d, c := rowFields(i)
		n, _ := fmt.Fprintf(w, "r%09d,%s,%d,%d,%s,%s\n", i, strconv.FormatFloat(a, 'g', -1, 64), age, d, c, note)
		total += int64(n)
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	return total, os.Rename(path+".tmp", path)
}

// ---- the server ----

type server struct {
	cmd  *exec.Cmd
	data string
	log  *os.File
}

// cur is the server running now: must kills it before the program
// exits, so no server outlives a failed run.
var cur *server

func startServer(data, jobsDir, logName string, extra ...string) (*server, error) {
	if resp, err := hc.Get(base() + "/readyz"); err == nil {
		resp.Body.Close()
		return nil, fmt.Errorf("a server already answers on %s: stop it first", *addr)
	}
	lf, err := os.Create(filepath.Join(*outDir, logName))
	if err != nil {
		return nil, err
	}
	args := []string{"-c", *serverCPU, *bin, "serve", "--addr", *addr, "--data", data, "--jobs-dir", jobsDir, "--pprof-addr", *pprofAddr}
	args = append(args, extra...)
	cmd := exec.Command("taskset", args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, data: data, log: lf}
	cur = s
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := hc.Get(base() + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return s, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.kill()
	return nil, fmt.Errorf("server not ready in 60 s; see %s", lf.Name())
}

// pid is the sluice process (taskset execs it: the same pid).
func (s *server) pid() int { return s.cmd.Process.Pid }

func (s *server) kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	s.cmd.Wait()
	s.log.Close()
	cur = nil
}

func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
	s.log.Close()
	cur = nil
	// Wait until the port is free for the next server.
	for i := 0; i < 200; i++ {
		if _, err := hc.Get(base() + "/readyz"); err != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func rssKB(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return -1
}

// ---- the jobs API ----

func call(method, path string, body any, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base()+path, rd)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return resp.StatusCode, json.Unmarshal(b, out)
	}
	return resp.StatusCode, nil
}

func submit(in, out string, chunkRows int) (string, error) {
	var st api.JobStatus
	_, err := call("POST", "/v1/jobs", api.JobSubmit{Model: "fraud", Input: api.JobIO{URI: in}, Output: api.JobIO{URI: out}, ChunkRows: chunkRows}, &st)
	return st.ID, err
}

func status(id string) (api.JobStatus, error) {
	var st api.JobStatus
	_, err := call("GET", "/v1/jobs/"+id, nil, &st)
	return st, err
}

func final(s api.JobState) bool { return s == "succeeded" || s == "failed" || s == "cancelled" }

// waitJob polls until cond or the job is final (an error if it ended
// otherwise than wanted).
func waitJob(id string, within time.Duration, cond func(api.JobStatus) bool) (api.JobStatus, error) {
	deadline := time.Now().Add(within)
	for {
		st, err := status(id)
		if err == nil && cond(st) {
			return st, nil
		}
		if err == nil && final(st.State) {
			return st, fmt.Errorf("job %s ended %s (%s): %+v", id, st.State, st.Message, st.JobCounts)
		}
		if time.Now().After(deadline) {
			return st, fmt.Errorf("job %s: not within %s (%v): %+v", id, within, err, st.JobCounts)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func cancelJob(id string) error {
	if _, err := call("POST", "/v1/jobs/"+id+":cancel", nil, nil); err != nil {
		return err
	}
	_, err := waitJob(id, 2*time.Minute, func(s api.JobStatus) bool { return s.State == "cancelled" })
	return err
}

// ---- load ----

var onlineURL = func() string { return base() + "/v1/models/fraud:predict" }

func onlineBody(i int) []byte {
	return []byte(`{"instances":[` + instance(i%100000) + `]}`)
}

// closedLoop: n workers, each sending its next 1-row call when the last
// is answered, for d; answered calls per second.
func closedLoop(n int, d time.Duration) (float64, int) {
	var ok, bad atomic.Int64
	stop := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := 0; w < n; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; time.Now().Before(stop); i += n {
				resp, err := hc.Post(onlineURL(), "application/json", bytes.NewReader(onlineBody(i)))
				if err != nil {
					bad.Add(1)
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 {
					ok.Add(1)
				} else {
					bad.Add(1)
				}
			}
		}(w)
	}
	wg.Wait()
	return float64(ok.Load()) / d.Seconds(), int(bad.Load())
}

type openResult struct {
	Offered  float64        `json:"offered"`  // req/s
	Achieved float64        `json:"achieved"` // answered 200 per second
	P50Ms    float64        `json:"p50Ms"`
	P99Ms    float64        `json:"p99Ms"`
	MaxMs    float64        `json:"maxMs"`
	Errors   int            `json:"errors"`
	Codes    map[string]int `json:"codes,omitempty"` // non-200 answers by status (0: no answer)
	N        int            `json:"n"`
}

// openLoop offers 1-row calls at rate (poisson) for d; latency from each
// call's intended send time to the end of its answer.
func openLoop(rate float64, d time.Duration, seed uint64) openResult {
	rng := rand.New(rand.NewPCG(seed, 7))
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	codes := map[string]int{}
	var wg sync.WaitGroup
	start := time.Now().Add(20 * time.Millisecond)
	at := start
	n := 0
	for {
		at = at.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if at.Sub(start) >= d {
			break
		}
		if w := time.Until(at); w > 0 {
			time.Sleep(w)
		}
		n++
		wg.Add(1)
		go func(intended time.Time, i int) {
			defer wg.Done()
			resp, err := hc.Post(onlineURL(), "application/json", bytes.NewReader(onlineBody(i)))
			code := 0
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				code = resp.StatusCode
			}
			l := time.Since(intended)
			mu.Lock()
			if code == 200 {
				lat = append(lat, l)
			} else {
				errs++
				codes[strconv.Itoa(code)]++
			}
			mu.Unlock()
		}(at, n)
	}
	wg.Wait()
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return math.NaN()
		}
		return float64(lat[min(len(lat)-1, int(math.Ceil(p*float64(len(lat))))-1)]) / 1e6
	}
	return openResult{Offered: rate, Achieved: float64(len(lat)) / d.Seconds(), P50Ms: q(0.50), P99Ms: q(0.99), MaxMs: q(1), Errors: errs, Codes: codes, N: n}
}

// clientLoop sends the rows as 1,000-row /v1 requests, one at a time;
// rows per second.
func clientLoop(bodies [][]byte, rows int) (float64, error) {
	t0 := time.Now()
	for k, b := range bodies {
		resp, err := hc.Post(onlineURL(), "application/json", bytes.NewReader(b))
		if err != nil {
			return 0, err
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return 0, fmt.Errorf("request %d: %d %s", k, resp.StatusCode, body)
		}
	}
	return float64(rows) / time.Since(t0).Seconds(), nil
}

func requestBodies(rows int) [][]byte {
	var out [][]byte
	for lo := 0; lo < rows; lo += 1000 {
		var b bytes.Buffer
		b.WriteString(`{"instances":[`)
		for i := lo; i < min(lo+1000, rows); i++ {
			if i > lo {
				b.WriteByte(',')
			}
			b.WriteString(instance(i))
		}
		b.WriteString(`],"deadlineMs":10000}`)
		out = append(out, b.Bytes())
	}
	return out
}

// ---- figures ----

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return math.NaN()
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

type results struct {
	Started string `json:"started"`
	Uptime  string `json:"uptimeBefore"`
	A       *figA  `json:"a,omitempty"`
	B       *figB  `json:"b,omitempty"`
	D       *figD  `json:"d,omitempty"`
	F       *figF  `json:"f,omitempty"`
}

type figA struct {
	Rows        int       `json:"rows"`
	JobRowsPS   []float64 `json:"jobRowsPerSecond"`
	LoopRowsPS  []float64 `json:"loopRowsPerSecond"`
	JobMedian   float64   `json:"jobMedian"`
	LoopMedian  float64   `json:"loopMedian"`
	Ratio       float64   `json:"ratio"`
	StatusRowsS []float64 `json:"statusRowsPerSecond"` // the job's own rowsPerSecond (running time only)
	Profile     string    `json:"profile,omitempty"`
}

type figB struct {
	CapacityReqS   []float64    `json:"capacityReqPerSecond"`
	Capacity       float64      `json:"capacity"`
	Rate           float64      `json:"onlineRate"`
	Without        []openResult `json:"without"`
	With           []openResult `json:"with"`
	P99Without     float64      `json:"p99WithoutMedian"`
	P99With        float64      `json:"p99WithMedian"`
	P99Ratio       float64      `json:"p99Ratio"`
	JobAlone       []float64    `json:"jobAloneRowsPerSecond"`
	JobDuring      []float64    `json:"jobDuringRowsPerSecond"`
	IdleUsed       []float64    `json:"idleUsed"`
	IdleUsedMedian float64      `json:"idleUsedMedian"`
	Profile        string       `json:"profile,omitempty"`
}

type figD struct {
	Rows       int      `json:"rows"`
	ChunkRows  int      `json:"chunkRows"`
	InFlight   []string `json:"chunksInFlight"`
	Redone     []int64  `json:"rowsRedone"`
	KilledAt   []int    `json:"chunksDoneAtKill"`
	Duplicates []int    `json:"duplicates"`
	Missing    []int    `json:"missing"`
}

type figF struct {
	Bytes       int64   `json:"bytes"`
	Rows        int64   `json:"rows"`
	IdleKB      int64   `json:"idleRSSKB"`
	PeakKB      int64   `json:"peakRSSKB"`
	PeakScanKB  int64   `json:"peakRSSScanKB"`
	AboveMB     float64 `json:"aboveIdleMB"`
	RowsDone    int64   `json:"rowsDone"`
	Seconds     float64 `json:"seconds"`
	Finished    string  `json:"state"`
	ScanSeconds float64 `json:"scanSeconds"`
}

func main() {
	flag.Parse()
	log.SetFlags(log.Ltime)
	must(os.MkdirAll(*outDir, 0o755))
	jobsDir := filepath.Join(*outDir, "jobs")
	must(os.MkdirAll(jobsDir, 0o755))
	up, _ := exec.Command("uptime").Output()
	res := results{Started: time.Now().UTC().Format(time.RFC3339), Uptime: strings.TrimSpace(string(up))}
	log.Printf("uptime: %s", res.Uptime)
	save := func() {
		b, _ := json.MarshalIndent(res, "", "  ")
		must(os.WriteFile(filepath.Join(*outDir, "results.json"), b, 0o644))
	}
	defer save()

	if strings.ContainsAny(*only, "ad") {
		must(writeJSONL(filepath.Join(jobsDir, "a.jsonl"), *rowsA))
	}
	if strings.Contains(*only, "b") {
		must(writeJSONL(filepath.Join(jobsDir, "b.jsonl"), *rowsB))
	}
	if strings.Contains(*only, "f") {
		log.Printf("f: writing the %d-byte CSV", *bigBytes)
		_, err := writeBigCSV(filepath.Join(jobsDir, "big.csv"), *bigBytes, *bigPad)
		must(err)
	}
	if *genOnly {
		return
	}
	seq := 0
	outName := func(p string) string { seq++; return fmt.Sprintf("%s-%d-%d.jsonl", p, os.Getpid(), seq) }
	clean := func(name string) {
		os.RemoveAll(filepath.Join(jobsDir, name))
		os.RemoveAll(filepath.Join(jobsDir, name+".parts"))
	}

	if strings.Contains(*only, "a") {
		res.A = new(figA)
		a := res.A
		a.Rows = *rowsA
		srv, err := startServer(filepath.Join(*outDir, "data-a"), jobsDir, "server-a.log")
		must(err)
		bodies := requestBodies(*rowsA)
		clientLoop(bodies[:min(50, len(bodies))], min(50, len(bodies))*1000) // warm-up
		for i := 0; i < *runs; i++ {
			lr, err := clientLoop(bodies, *rowsA)
			must(err)
			out := outName("a")
			t0 := time.Now()
			id, err := submit("file:a.jsonl", "file:"+out, 0)
			must(err)
			st, err := waitJob(id, 10*time.Minute, func(s api.JobStatus) bool { return s.State == "succeeded" })
			must(err)
			jr := float64(*rowsA) / time.Since(t0).Seconds()
			clean(out)
			a.LoopRowsPS, a.JobRowsPS, a.StatusRowsS = append(a.LoopRowsPS, lr), append(a.JobRowsPS, jr), append(a.StatusRowsS, st.RowsPerSecond)
			log.Printf("a run %d: client loop %.0f rows/s, job %.0f rows/s (status says %.0f)", i+1, lr, jr, st.RowsPerSecond)
			save()
		}
		if *profile {
			// One more job, not counted: the server's CPU profile over it.
			secs := max(1, int(float64(*rowsA)/median(a.JobRowsPS)))
			out := outName("a")
			id, err := submit("file:a.jsonl", "file:"+out, 0)
			must(err)
			prof := filepath.Join(*outDir, "job-alone.pprof")
			if err := fetchProfile(prof, secs); err != nil {
				log.Printf("profile: %v", err)
			} else {
				a.Profile = prof
			}
			_, err = waitJob(id, 10*time.Minute, func(s api.JobStatus) bool { return s.State == "succeeded" })
			must(err)
			clean(out)
		}
		a.JobMedian, a.LoopMedian = median(a.JobRowsPS), median(a.LoopRowsPS)
		a.Ratio = a.JobMedian / a.LoopMedian
		log.Printf("a: job %.0f rows/s vs client loop %.0f rows/s: %.2fx", a.JobMedian, a.LoopMedian, a.Ratio)
		srv.stop()
		save()
	}

	if strings.Contains(*only, "b") {
		res.B = new(figB)
		b := res.B
		srv, err := startServer(filepath.Join(*outDir, "data-b"), jobsDir, "server-b.log")
		must(err)
		closedLoop(*conc, 2*time.Second) // warm-up
		for i := 0; i < 3; i++ {
			c, bad := closedLoop(*conc, 4*time.Second)
			b.CapacityReqS = append(b.CapacityReqS, c)
			log.Printf("b: capacity run %d: %.0f req/s (%d errors)", i+1, c, bad)
		}
		b.Capacity = median(b.CapacityReqS)
		b.Rate = *loadShare * b.Capacity
		// rowsDone over a window (the store counts done chunks).
		rowsOver := func(id string, d time.Duration, during func()) float64 {
			s0, err := status(id)
			must(err)
			t0 := time.Now()
			if during != nil {
				during()
			} else {
				time.Sleep(d)
			}
			s1, err := status(id)
			must(err)
			return float64(s1.RowsDone-s0.RowsDone) / time.Since(t0).Seconds()
		}
		startJob := func() (string, string) {
			out := outName("b")
			id, err := submit("file:b.jsonl", "file:"+out, 0)
			must(err)
			_, err = waitJob(id, 5*time.Minute, func(s api.JobStatus) bool { return s.State == "running" && s.ChunksDone >= 2 })
			must(err)
			return id, out
		}
		for i := 0; i < *runs; i++ {
			without := openLoop(b.Rate, *window, uint64(2*i+1))
			id, out := startJob()
			alone := rowsOver(id, *window, nil)
			var with openResult
			during := rowsOver(id, 0, func() { with = openLoop(b.Rate, *window, uint64(2*i+2)) })
			if st, _ := status(id); final(st.State) {
				log.Printf("b run %d: the job ended during the windows (%s): make -rows-b larger", i+1, st.State)
			}
			must(cancelJob(id))
			clean(out)
			idle := alone * (1 - with.Achieved/b.Capacity)
			used := during / idle
			b.Without, b.With = append(b.Without, without), append(b.With, with)
			b.JobAlone, b.JobDuring, b.IdleUsed = append(b.JobAlone, alone), append(b.JobDuring, during), append(b.IdleUsed, used)
			log.Printf("b run %d: online %.0f req/s: p99 %.2f ms without, %.2f ms with a job (p50 %.2f / %.2f; errors %d / %d); job %.0f rows/s alone, %.0f during: %.0f%% of idle",
				i+1, b.Rate, without.P99Ms, with.P99Ms, without.P50Ms, with.P50Ms, without.Errors, with.Errors, alone, during, 100*used)
			save()
		}
		var pw, pj []float64
		for i := range b.Without {
			pw, pj = append(pw, b.Without[i].P99Ms), append(pj, b.With[i].P99Ms)
		}
		b.P99Without, b.P99With = median(pw), median(pj)
		b.P99Ratio = b.P99With / b.P99Without
		b.IdleUsedMedian = median(b.IdleUsed)
		log.Printf("b: p99 %.2f ms without, %.2f ms with: %.2fx; c: %.0f%% of idle capacity", b.P99Without, b.P99With, b.P99Ratio, 100*b.IdleUsedMedian)
		if *profile {
			id, out := startJob()
			prof := filepath.Join(*outDir, "job-online.pprof")
			done := make(chan error, 1)
			go func() { done <- fetchProfile(prof, int(window.Seconds())) }()
			openLoop(b.Rate, *window, 99)
			if err := <-done; err != nil {
				log.Printf("profile: %v", err)
			} else {
				b.Profile = prof
			}
			must(cancelJob(id))
			clean(out)
		}
		srv.stop()
		save()
	}

	if strings.Contains(*only, "d") {
		res.D = new(figD)
		d := res.D
		d.Rows, d.ChunkRows = *rowsA, 1000
		for i := 0; i < *runs*len(strings.Split(*dKs, ",")); i++ {
			ks := strings.Split(*dKs, ",")
			k := strings.TrimSpace(ks[i%len(ks)])
			data := filepath.Join(*outDir, fmt.Sprintf("data-d%d-%d", os.Getpid(), i))
			srv, err := startServer(data, jobsDir, fmt.Sprintf("server-d%d.log", i), "--job-chunks-in-flight", k)
			must(err)
			out := outName("d")
			id, err := submit("file:a.jsonl", "file:"+out, 1000)
			must(err)
			// Kill at a different point in each run: 30, 50, 70 % of chunks.
			frac := []float64{0.5, 0.3, 0.7}[(i/len(ks))%3]
			at, err := waitJob(id, 10*time.Minute, func(s api.JobStatus) bool {
				return s.ChunksTotal > 0 && float64(s.ChunksDone) >= frac*float64(s.ChunksTotal)
			})
			must(err)
			srv.kill()
			srv, err = startServer(data, jobsDir, fmt.Sprintf("server-d%d-restart.log", i), "--job-chunks-in-flight", k)
			must(err)
			st, err := waitJob(id, 10*time.Minute, func(s api.JobStatus) bool { return s.State == "succeeded" })
			must(err)
			srv.stop()
			dups, missing, err := checkIDs(filepath.Join(jobsDir, out), *rowsA)
			must(err)
			clean(out)
			os.RemoveAll(data)
			d.InFlight = append(d.InFlight, k)
			d.Redone, d.KilledAt = append(d.Redone, st.RowsRedone), append(d.KilledAt, at.ChunksDone)
			d.Duplicates, d.Missing = append(d.Duplicates, dups), append(d.Missing, missing)
			log.Printf("d run %d (--job-chunks-in-flight %s): killed at %d of %d chunks; rowsRedone %d; output: %d duplicate ids, %d missing", i+1, k, at.ChunksDone, at.ChunksTotal, st.RowsRedone, dups, missing)
			save()
		}
	}

	if strings.Contains(*only, "f") {
		res.F = new(figF)
		f := res.F
		st0, err := os.Stat(filepath.Join(jobsDir, "big.csv"))
		must(err)
		f.Bytes = st0.Size()
		srv, err := startServer(filepath.Join(*outDir, "data-f"), jobsDir, "server-f.log")
		must(err)
		closedLoop(2, time.Second) // warm
		for i := 0; i < 12; i++ {
			f.IdleKB = max(f.IdleKB, rssKB(srv.pid()))
			time.Sleep(250 * time.Millisecond)
		}
		out := outName("f")
		t0 := time.Now()
		id, err := submit("file:big.csv", "file:"+out, 1000)
		must(err)
		var st api.JobStatus
		for time.Since(t0) < *bigFor {
			kb := rssKB(srv.pid())
			f.PeakKB = max(f.PeakKB, kb)
			st, err = status(id)
			if err == nil && !st.Scanned {
				f.PeakScanKB = max(f.PeakScanKB, kb)
			} else if err == nil && f.ScanSeconds == 0 {
				f.ScanSeconds = time.Since(t0).Seconds()
				log.Printf("f: scanned %d rows in %.0f s; RSS %d MB (idle %d MB)", st.RowsTotal, f.ScanSeconds, kb>>10, f.IdleKB>>10)
			}
			if err == nil && final(st.State) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		f.Seconds = time.Since(t0).Seconds()
		f.Rows, f.RowsDone, f.Finished = st.RowsTotal, st.RowsDone, string(st.State)
		if !final(st.State) {
			must(cancelJob(id))
			f.Finished = "cancelled after -big-for"
		}
		f.AboveMB = float64(f.PeakKB-f.IdleKB) / 1024
		log.Printf("f: %d bytes, %d rows, %d scored in %.0f s (%s): RSS idle %d MB, peak %d MB (scan %d MB): +%.0f MB",
			f.Bytes, f.Rows, f.RowsDone, f.Seconds, f.Finished, f.IdleKB>>10, f.PeakKB>>10, f.PeakScanKB>>10, f.AboveMB)
		srv.stop()
		clean(out)
		save()
	}
}

// fetchProfile saves the server's CPU profile over the next secs seconds.
func fetchProfile(path string, secs int) error {
	resp, err := hc.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", *pprofAddr, secs))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("profile: %s", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// checkIDs reads a JSONL output and counts ids seen twice and ids
// r00000000..r(n-1) not seen.
func checkIDs(path string, n int) (dups, missing int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	seen := make([]bool, n)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return 0, 0, fmt.Errorf("%s: %v", path, err)
		}
		k, err := strconv.Atoi(strings.TrimPrefix(r.ID, "r"))
		if err != nil || k < 0 || k >= n {
			return 0, 0, fmt.Errorf("%s: id %q is not an input id", path, r.ID)
		}
		if seen[k] {
			dups++
		}
		seen[k] = true
	}
	for _, s := range seen {
		if !s {
			missing++
		}
	}
	return dups, missing, sc.Err()
}

func must(err error) {
	if err != nil {
		if cur != nil {
			cur.kill()
		}
		log.Fatal(err)
	}
}
