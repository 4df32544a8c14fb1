package tenant

import (
	"errors"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/strictyaml"
)

// FuzzParse: any tenants file is either a valid set or a *strictyaml.Error
// naming the file, never a panic; a valid set has tenants with valid
// names, answers Authenticate with a coded error for unknown keys, and
// its quotas take and refund without panicking. The corpus is in
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("tenants:\n  - {name: a, keys: [\"sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"], models: [\"*\"], quota: {instancesPerSecond: 1e308, burst: .nan}}\n"))
	f.Add([]byte("tenants: &x [*x]\n"))
	f.Add([]byte("tenants: []\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Parse("t.yaml", data)
		if err != nil {
			var e *strictyaml.Error
			if !errors.As(err, &e) || e.File != "t.yaml" || len(e.Problems) == 0 {
				t.Fatalf("error %T %v: want a *strictyaml.Error with problems", err, err)
			}
			return
		}
		names := s.Names()
		if len(names) == 0 {
			t.Fatal("a valid set without tenants")
		}
		for _, n := range names {
			if !nameRE.MatchString(n) {
				t.Fatalf("invalid tenant name %q accepted", n)
			}
		}
		if _, err := s.Authenticate("Bearer not-a-key-of-the-fuzzer"); errs.CodeOf(err) != errs.Unauthenticated {
			t.Fatalf("an unknown key: %v, want unauthenticated", err)
		}
		now := time.Now()
		for _, tn := range s.tenants {
			if err := tn.Take(1, now); err == nil {
				tn.Refund(1)
			}
		}
	})
}
