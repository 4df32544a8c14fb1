package server

import (
	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/predcache"
	"github.com/sluiceml/sluice/internal/telemetry"
)

// The X-Cache header's values, one array each (a header map holds them
// without an allocation per answer; nothing appends to them).
var xCacheValues = map[string][]string{
	gateway.CacheHit:     {gateway.CacheHit},
	gateway.CacheMiss:    {gateway.CacheMiss},
	gateway.CachePartial: {gateway.CachePartial},
}

// xCache is the X-Cache header of an answer (nil: the version has no
// prediction cache, or the call failed).
func xCache(a *gateway.Answer) []string {
	if a.Cache == "" {
		return nil
	}
	return xCacheValues[a.Cache]
}

// cacheStates reads the prediction caches' figures for the metrics.
func cacheStates(set *predcache.Set) func() []telemetry.CacheState {
	return func() []telemetry.CacheState {
		st := set.States()
		out := make([]telemetry.CacheState, len(st))
		for i, s := range st {
			out[i] = telemetry.CacheState{Model: s.Model, Version: s.Version, Entries: s.Entries, Bytes: s.Bytes}
		}
		return out
	}
}
