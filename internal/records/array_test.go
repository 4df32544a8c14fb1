package records

import (
	"testing"

	"github.com/sluiceml/sluice/internal/schema"
)

func TestCanonicalJSONArray(t *testing.T) {
	v := schema.Value{Kind: schema.Array, Items: []string{"1", "2.50", "3e0"}}
	if got, want := string(CanonicalJSON([]schema.Instance{inst("tokens", v)})), `[{"tokens":[1,2.5,3]}]`; got != want {
		t.Errorf("canonical JSON = %s, want %s", got, want)
	}
	w := schema.Value{Kind: schema.Array, Items: []string{"1", "3", "2"}}
	if InputHash([]schema.Instance{inst("tokens", v)}) == InputHash([]schema.Instance{inst("tokens", w)}) {
		t.Error("different arrays hash the same")
	}
}
