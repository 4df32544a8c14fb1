// Command grpcjson compares the same rows sent to a running Sluice as /v1
// JSON and as OIP v2 gRPC (raw FP32 contents), closed loop with a few
// concurrent clients: rows/s and latency percentiles per request size.
// The model must have only float input fields (iris does).
//
//	go run ./bench/grpcjson --http http://127.0.0.1:18090 --grpc 127.0.0.1:18091 --model iris
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sluiceml/sluice/internal/oip/inferencepb"
)

type result struct {
	name     string
	rows     int
	requests int
	errors   int
	elapsed  time.Duration
	lat      []time.Duration
}

func (r result) rowsPerSec() float64 { return float64(r.requests*r.rows) / r.elapsed.Seconds() }

func pct(l []time.Duration, p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	return l[min(len(l)-1, int(p*float64(len(l))))]
}

// run calls do from conc goroutines for d and collects latencies.
func run(name string, rows, conc int, d time.Duration, do func() error) result {
	var mu sync.Mutex
	res := result{name: name, rows: rows}
	var wg sync.WaitGroup
	start := time.Now()
	stop := start.Add(d)
	for i := 0; i < conc; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				t := time.Now()
				err := do()
				el := time.Since(t)
				mu.Lock()
				res.requests++
				if err != nil {
					res.errors++
					if res.errors == 1 {
						fmt.Fprintln(os.Stderr, name, "error:", err)
					}
				} else {
					res.lat = append(res.lat, el)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	sort.Slice(res.lat, func(i, j int) bool { return res.lat[i] < res.lat[j] })
	return res
}

func main() {
	httpURL := flag.String("http", "http://127.0.0.1:18090", "Sluice HTTP base URL")
	grpcAddr := flag.String("grpc", "127.0.0.1:18091", "Sluice --grpc-addr")
	model := flag.String("model", "iris", "a model whose input fields are all floats")
	conc := flag.Int("concurrency", 4, "concurrent clients")
	dur := flag.Duration("duration", 5*time.Second, "per measurement")
	sizes := flag.String("rows", "1,1000", "rows per request")
	runs := flag.Int("runs", 3, "repetitions (the table shows medians)")
	flag.Parse()

	var meta struct {
		Inputs []struct{ Name, Datatype string } `json:"inputs"`
	}
	resp, err := http.Get(*httpURL + "/v2/models/" + *model)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := json.NewDecoder(resp.Body).Decode(&meta); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	resp.Body.Close()
	fields := make([]string, len(meta.Inputs))
	for i, in := range meta.Inputs {
		if in.Datatype != "FP32" {
			fmt.Fprintf(os.Stderr, "input %s is %s: pick a model whose inputs are all floats\n", in.Name, in.Datatype)
			os.Exit(1)
		}
		fields[i] = in.Name
	}
	conn, err := grpc.NewClient(*grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer conn.Close()
	ic := inferencepb.NewGRPCInferenceServiceClient(conn)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conc * 2}}

	fmt.Printf("model %s, %d clients, %s per run, %d runs (medians)\n\n", *model, *conc, *dur, *runs)
	fmt.Println("| rows/request | transport | rows/s | req/s | p50 | p99 | errors | gRPC/JSON rows/s |")
	fmt.Println("|---:|---|---:|---:|---:|---:|---:|---:|")
	for _, s := range strings.Split(*sizes, ",") {
		var n int
		fmt.Sscan(s, &n)
		rng := rand.New(rand.NewPCG(1, uint64(n)))
		vals := make([][]float32, len(fields))
		for f := range vals {
			vals[f] = make([]float32, n)
			for i := range vals[f] {
				vals[f][i] = float32(math.Round((1+rng.Float64()*6)*10) / 10)
			}
		}
		// /v1 JSON body
		var b strings.Builder
		b.WriteString(`{"deadlineMs":5000,"instances":[`)
		for i := 0; i < n; i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteByte('{')
			for f, name := range fields {
				if f > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, "%q:%g", name, vals[f][i])
			}
			b.WriteByte('}')
		}
		b.WriteString("]}")
		body := []byte(b.String())
		// gRPC request, raw contents
		req := &inferencepb.ModelInferRequest{ModelName: *model}
		for f, name := range fields {
			raw := make([]byte, 4*n)
			for i, v := range vals[f] {
				binary.LittleEndian.PutUint32(raw[4*i:], math.Float32bits(v))
			}
			req.Inputs = append(req.Inputs, &inferencepb.ModelInferRequest_InferInputTensor{Name: name, Datatype: "FP32", Shape: []int64{int64(n)}})
			req.RawInputContents = append(req.RawInputContents, raw)
		}
		doJSON := func() error {
			resp, err := hc.Post(*httpURL+"/v1/models/"+*model+":predict", "application/json", bytes.NewReader(body))
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			out, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 {
				return fmt.Errorf("%d %s", resp.StatusCode, out[:min(len(out), 200)])
			}
			return nil
		}
		doGRPC := func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, err := ic.ModelInfer(ctx, req)
			return err
		}
		med := func(name string, do func() error) result {
			var rs []result
			for r := 0; r < *runs; r++ {
				rs = append(rs, run(name, n, *conc, *dur, do))
			}
			sort.Slice(rs, func(i, j int) bool { return rs[i].rowsPerSec() < rs[j].rowsPerSec() })
			return rs[len(rs)/2]
		}
		j := med("/v1 JSON", doJSON)
		g := med("OIP gRPC raw FP32", doGRPC)
		for _, r := range []result{j, g} {
			ratio := ""
			if r.name == g.name {
				ratio = fmt.Sprintf("%.2fx", g.rowsPerSec()/j.rowsPerSec())
			}
			fmt.Printf("| %d | %s | %.0f | %.0f | %.2f ms | %.2f ms | %d | %s |\n", n, r.name, r.rowsPerSec(), float64(r.requests)/r.elapsed.Seconds(),
				float64(pct(r.lat, 0.5))/1e6, float64(pct(r.lat, 0.99))/1e6, r.errors, ratio)
		}
	}
}
