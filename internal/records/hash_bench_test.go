package records

import (
	"fmt"
	"testing"

	"github.com/sluiceml/sluice/internal/schema"
)

// fraudInstances are n instances shaped like the fraud example's requests
// (the rows of internal/server's BenchmarkPredict*): four members in the
// order sent, optional ones absent in some.
func fraudInstances(n int) []schema.Instance {
	countries := []string{"US", "GB", "DE"}
	num := func(s string) schema.Value { return schema.Value{Kind: schema.Number, Text: s} }
	insts := make([]schema.Instance, n)
	for i := range insts {
		inst := schema.Instance{
			{Name: "amount", Value: num(fmt.Sprintf("%d.%02d", (i*37)%2000, i%100))},
			{Name: "accountAgeDays", Value: num(fmt.Sprint((i * 13) % 3000))},
		}
		if i%4 != 3 {
			inst = append(inst, schema.Member{Name: "declines5m", Value: num(fmt.Sprint(i % 6))})
		}
		if i%7 != 6 {
			inst = append(inst, schema.Member{Name: "country", Value: schema.Value{Kind: schema.String, Text: countries[i%3]}})
		}
		insts[i] = inst
	}
	return insts
}

// BenchmarkInputHash is the record's input hash of a 1,000-row request
// (issue 12, item 3).
func BenchmarkInputHash(b *testing.B) {
	for _, n := range []int{1, 1000} {
		insts := fraudInstances(n)
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = InputHash(insts)
			}
		})
	}
}
