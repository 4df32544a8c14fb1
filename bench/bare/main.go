// Command bare is the baseline for the overhead benchmark (docs/benchmarks.md,
// issue 3): the least a Go server must do to answer a churn prediction. It
// decodes {"instances":[{...}]} with encoding/json into a struct, applies the
// churn example's preprocessing and logistic regression (weights copied from
// examples/churn/model.json) and writes a response of the same shape as
// Sluice's. No schema checks, no queue, no batching, no metrics.
//
//	taskset -c 0 go run ./bench/bare --addr 127.0.0.1:18091
//	sluice bench churn --server http://127.0.0.1:18091 --payload @bench/churn-payload.json
package main

import (
	"encoding/json"
	"flag"
	"log"
	"math"
	"net/http"
	"strconv"
)

type instance struct {
	TenureMonths   float64 `json:"tenureMonths"`
	SupportTickets float64 `json:"supportTickets"`
	Plan           string  `json:"plan"`
}

type request struct {
	Instances  []instance `json:"instances"`
	DeadlineMs int        `json:"deadlineMs"`
}

// examples/churn/model.json: standardize(tenureMonths, 24, 12),
// log1p(supportTickets), onehot(plan: basic, pro, team).
var (
	weights = [5]float64{-0.7221627853415215, 1.3418361809101311, 0.452303095739328, 0.07486570174339745, -0.5282254584947129}
	bias    = -3.151456939975457
)

func predict(in instance) float32 {
	z := bias + weights[0]*(in.TenureMonths-24)/12 + weights[1]*math.Log1p(in.SupportTickets)
	switch in.Plan {
	case "basic":
		z += weights[2]
	case "pro":
		z += weights[3]
	case "team":
		z += weights[4]
	}
	return float32(1 / (1 + math.Exp(-z)))
}

func handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, `{"error":{"code":"method_not_allowed"}}`, http.StatusMethodNotAllowed)
		return
	}
	var req request
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"code":"invalid_argument","message":"bad JSON"}}` + "\n"))
		return
	}
	b := make([]byte, 0, 128+len(req.Instances)*32)
	b = append(b, `{"predictions":[`...)
	for i, in := range req.Instances {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"churnProbability":`...)
		b = strconv.AppendFloat(b, float64(predict(in)), 'g', -1, 32)
		b = append(b, '}')
	}
	b = append(b, `],"modelVersion":"churn@1","schemaVersion":"churn-input@1","requestId":`...)
	b = strconv.AppendQuote(b, r.Header.Get("X-Request-Id"))
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:18091", "listen address")
	flag.Parse()
	http.HandleFunc("/v1/models/churn:predict", handle)
	log.Printf("bare churn server on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}
