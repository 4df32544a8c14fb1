// Command barefraud is the baseline for issue 12's "1-row fraud vs a bare
// net/http handler" goal: the least a Go server must do to answer a fraud
// prediction with the same model. It decodes {"instances":[{...}]} with
// encoding/json into a struct, applies the fraud example's preprocessing
// (log1p(amount), accountAgeDays, declines5m or NaN when absent, one-hot
// country over US, GB, DE, all NaN when absent) and calls the same XGBoost runtime Sluice uses
// (internal/runtime/xgboost) on examples/fraud/model.json, in the
// handler's goroutine, and writes an answer of Sluice's shape. No schema
// checks, no queue, no batching, no records, no metrics.
//
//	taskset -c 0 go run ./bench/barefraud --addr 127.0.0.1:18091
//	bench/overload --server http://127.0.0.1:18091 --model fraud --payload @bench/fraud-payload.json --closed 16
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"math"
	"net/http"
	"os"
	"strconv"

	"github.com/sluiceml/sluice/internal/runtime"
	"github.com/sluiceml/sluice/internal/runtime/xgboost"
)

type instance struct {
	Amount         float64  `json:"amount"`
	AccountAgeDays float64  `json:"accountAgeDays"`
	Declines5m     *float64 `json:"declines5m"`
	Country        string   `json:"country"`
}

type request struct {
	Instances  []instance `json:"instances"`
	DeadlineMs int        `json:"deadlineMs"`
}

const cols = 6

var model runtime.Model

func handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, `{"error":{"code":"method_not_allowed"}}`, http.StatusMethodNotAllowed)
		return
	}
	var req request
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&req); err != nil || len(req.Instances) == 0 || len(req.Instances) > 1000 {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"code":"invalid_argument","message":"bad request"}}` + "\n"))
		return
	}
	data := make([]float32, len(req.Instances)*cols)
	for i, in := range req.Instances {
		row := data[i*cols : (i+1)*cols]
		row[0] = float32(math.Log1p(in.Amount))
		row[1] = float32(in.AccountAgeDays)
		row[2] = float32(math.NaN())
		if in.Declines5m != nil {
			row[2] = float32(*in.Declines5m)
		}
		switch in.Country {
		case "": // absent: missing, as Sluice's onehot of an optional field
			row[3], row[4], row[5] = float32(math.NaN()), float32(math.NaN()), float32(math.NaN())
		case "US":
			row[3] = 1
		case "GB":
			row[4] = 1
		case "DE":
			row[5] = 1
		}
	}
	out, err := model.Predict(r.Context(), runtime.Batch{Rows: len(req.Instances), Cols: cols, Data: data})
	if err != nil {
		http.Error(w, `{"error":{"code":"internal"}}`, http.StatusInternalServerError)
		return
	}
	b := make([]byte, 0, 128+len(req.Instances)*32)
	b = append(b, `{"predictions":[`...)
	for i := range req.Instances {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"riskScore":`...)
		b = strconv.AppendFloat(b, float64(out.Data[i*out.Cols]), 'g', -1, 32)
		b = append(b, '}')
	}
	b = append(b, `],"modelVersion":"fraud@1","schemaVersion":"fraud-input@3","requestId":`...)
	b = strconv.AppendQuote(b, r.Header.Get("X-Request-Id"))
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func main() {
	addr := flag.String("addr", "127.0.0.1:18091", "listen address")
	artifact := flag.String("model", "examples/fraud/model.json", "the fraud example's XGBoost model")
	flag.Parse()
	art, err := os.ReadFile(*artifact)
	if err != nil {
		log.Fatal(err)
	}
	model, err = xgboost.Runtime{}.Load(context.Background(), runtime.Spec{Name: "fraud@1", Features: cols, Outputs: 1}, art)
	if err != nil {
		log.Fatal(err)
	}
	http.HandleFunc("/v1/models/fraud:predict", handle)
	log.Printf("bare fraud server on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, nil))
}
