package modelpkg

import (
	"testing"
	"time"
)

func TestCacheDefaults(t *testing.T) {
	for _, tc := range []struct {
		name, yaml string
		ttl        time.Duration
		max        int64
	}{
		{"defaults", "cache: {}\n", DefaultCacheTTL, DefaultCacheMaxBytes},
		{"ttl only", "cache: {ttl: 10s}\n", 10 * time.Second, DefaultCacheMaxBytes},
		{"both", "cache: {ttl: 1h, maxBytes: 1GiB}\n", time.Hour, 1 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			y := "name: m\nruntime: linear\nartifact: model.json\ninput: {schema: s@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\n" + tc.yaml
			spec, err := Parse("model.yaml", []byte(y))
			if err != nil {
				t.Fatal(err)
			}
			c := spec.Manifest.Cache
			if c == nil || c.TTL.Duration != tc.ttl || c.MaxBytes.Bytes != tc.max {
				t.Fatalf("cache = %+v, want ttl %s maxBytes %d", c, tc.ttl, tc.max)
			}
		})
	}
	spec, err := Parse("model.yaml", []byte("name: m\nruntime: linear\nartifact: model.json\ninput: {schema: s@1, fields: [{name: x, type: float}]}\noutput: {schema: o@1, fields: [{name: y}]}\n"))
	if err != nil || spec.Manifest.Cache != nil {
		t.Fatalf("no cache: spec %v err %v", spec, err)
	}
}
