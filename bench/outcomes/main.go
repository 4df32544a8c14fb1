// Command outcomes measures outcome ingestion (issue 22, goal row 2:
// outcomes per second on 2 cores): it makes --requests predictions of
// --instances instances each to --model (so --requests × --instances
// (request id, instance) pairs to post outcomes for), waits until their
// joins are written, then posts one outcome per pair per round, in
// batches of --batch from --conc clients, --rounds rounds (each round a
// new outcome name, so every outcome is new and stored, not a
// duplicate). It prints one JSON line per round: outcomes, seconds,
// outcomes per second, accepted, duplicates, unknown.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

type outcome struct {
	RequestID string  `json:"requestId"`
	Instance  int     `json:"instance"`
	Name      string  `json:"name"`
	Value     float64 `json:"value"`
}

type result struct {
	Accepted   int `json:"accepted"`
	Duplicates int `json:"duplicates"`
	Unknown    int `json:"unknown"`
}

func main() {
	url := flag.String("url", "http://127.0.0.1:18480", "server")
	model := flag.String("model", "fraud", "model (a built-in example: fraud)")
	instance := flag.String("instance", `{"amount":80,"accountAgeDays":91,"declines5m":0,"country":"US"}`, "one instance of the model")
	requests := flag.Int("requests", 100, "predictions to make")
	instances := flag.Int("instances", 1000, "instances per prediction")
	batch := flag.Int("batch", 1000, "outcomes per POST")
	conc := flag.Int("conc", 4, "clients posting at once")
	rounds := flag.Int("rounds", 3, "rounds of outcomes")
	prefix := flag.String("prefix", fmt.Sprintf("b%d", time.Now().UnixNano()), "request id prefix")
	flag.Parse()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: *conc}, Timeout: 60 * time.Second}
	post := func(path string, hdr map[string]string, body []byte) ([]byte, error) {
		req, _ := http.NewRequest(http.MethodPost, *url+path, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			return nil, fmt.Errorf("%s: %d %s", path, resp.StatusCode, b)
		}
		return b, err
	}
	insts := "[" + strings.TrimSuffix(strings.Repeat(*instance+",", *instances), ",") + "]"
	for i := range *requests {
		body := fmt.Appendf(nil, `{"instances":%s,"deadlineMs":10000}`, insts)
		if _, err := post("/v1/models/"+*model+":predict", map[string]string{"X-Request-Id": fmt.Sprintf("%s-%d", *prefix, i)}, body); err != nil {
			fmt.Fprintln(os.Stderr, "outcomes: predict:", err)
			os.Exit(1)
		}
	}
	// Wait for the last join.
	probe := fmt.Appendf(nil, `{"outcomes":[{"requestId":"%s-%d","name":"probe","value":1}]}`, *prefix, *requests-1)
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := post("/v1/outcomes", nil, probe)
		var r result
		if err == nil && json.Unmarshal(b, &r) == nil && r.Unknown == 0 {
			break
		}
		if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "outcomes: the joins were not written within 30 s", err)
			os.Exit(1)
		}
		time.Sleep(100 * time.Millisecond)
	}
	total := *requests * *instances
	for round := range *rounds {
		// Bodies built before the clock starts: the server's work is measured.
		var bodies [][]byte
		var cur []outcome
		for i := range *requests {
			for k := range *instances {
				cur = append(cur, outcome{RequestID: fmt.Sprintf("%s-%d", *prefix, i), Instance: k, Name: fmt.Sprintf("m%d", round), Value: float64((i + k) % 2)})
				if len(cur) == *batch {
					b, _ := json.Marshal(map[string]any{"outcomes": cur})
					bodies = append(bodies, b)
					cur = cur[:0]
				}
			}
		}
		if len(cur) > 0 {
			b, _ := json.Marshal(map[string]any{"outcomes": cur})
			bodies = append(bodies, b)
		}
		work := make(chan []byte, len(bodies))
		for _, b := range bodies {
			work <- b
		}
		close(work)
		var mu sync.Mutex
		var sum result
		var failed error
		var wg sync.WaitGroup
		start := time.Now()
		for range *conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for b := range work {
					out, err := post("/v1/outcomes", nil, b)
					var r result
					if err == nil {
						err = json.Unmarshal(out, &r)
					}
					mu.Lock()
					if err != nil && failed == nil {
						failed = err
					}
					sum.Accepted += r.Accepted
					sum.Duplicates += r.Duplicates
					sum.Unknown += r.Unknown
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		secs := time.Since(start).Seconds()
		if failed != nil {
			fmt.Fprintln(os.Stderr, "outcomes: post:", failed)
			os.Exit(1)
		}
		line, _ := json.Marshal(map[string]any{"round": round, "outcomes": total, "seconds": secs, "perSecond": float64(total) / secs,
			"batch": *batch, "conc": *conc, "accepted": sum.Accepted, "duplicates": sum.Duplicates, "unknown": sum.Unknown})
		fmt.Println(string(line))
	}
}
