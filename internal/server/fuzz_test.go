package server

import (
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/schema"
)

// FuzzDecodePredict feeds arbitrary bodies to the predict decoder and the
// schema validator: they must return a row or a typed error, never panic.
func FuzzDecodePredict(f *testing.F) {
	for _, s := range []string{
		`{"instances":[{"amount":800.0,"accountAgeDays":91,"declines5m":3,"country":"US"}],"deadlineMs":50}`,
		`{"instances":[{"amount":1e400}]}`,
		`{"instances":[{"amount":"NaN","amount":2}]}`,
		`{"instances":[[1,2]]}`,
		`{"instances":[{"country":null}]} x`,
		`{"deadlineMs":-1}`,
		`[`,
	} {
		f.Add([]byte(s))
	}
	min0 := 0.0
	sch, probs := schema.Compile([]schema.Field{
		{Name: "amount", Type: "float", Min: &min0},
		{Name: "accountAgeDays", Type: "int", Min: &min0},
		{Name: "declines5m", Type: "int", Optional: true},
		{Name: "country", Type: "category", Values: []string{"US", "GB", "DE"}, Optional: true},
		{Name: "vip", Type: "bool", Optional: true},
	}, []schema.Step{{Op: "log1p", Field: "amount"}, {Op: "onehot", Field: "country"}, {Op: "bucketize", Field: "accountAgeDays", Boundaries: []float64{7, 30, 365}}})
	if probs != nil {
		f.Fatal(probs)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodePredict(body, time.Minute)
		if err != nil {
			if errs.As(err).Code == errs.Internal {
				t.Fatalf("decoder returned an untyped error: %v", err)
			}
			return
		}
		row := make([]float32, sch.Width())
		for _, inst := range req.Instances {
			if err := sch.Row("instances[0]", inst, row); err != nil && errs.As(err).Code != errs.InvalidArgument {
				t.Fatalf("schema returned %v", err)
			}
		}
	})
}
