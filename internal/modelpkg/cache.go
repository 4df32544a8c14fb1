package modelpkg

import "time"

// Cache is model.yaml cache:: the version's prediction cache. Without it
// nothing is cached. Parse fills in the defaults.
type Cache struct {
	// TTL is how long an answer is served from the cache after it was
	// computed (default 5m; 1s – 24h).
	TTL Duration `yaml:"ttl,omitempty"`
	// MaxBytes bounds the version's entries: keys, outputs and their
	// bookkeeping (default 64MiB; 64KiB – 16GiB).
	MaxBytes Size `yaml:"maxBytes,omitempty"`
}

// Cache defaults and bounds.
const (
	DefaultCacheTTL      = 5 * time.Minute
	DefaultCacheMaxBytes = 64 << 20
	MinCacheTTL          = time.Second
	MaxCacheTTL          = 24 * time.Hour
	MinCacheMaxBytes     = 64 << 10
	MaxCacheMaxBytes     = 16 << 30
)

// checkCache fills in cache:'s defaults and checks its bounds.
func checkCache(ps *problems, c *Cache) {
	if c.TTL.Duration == 0 {
		c.TTL.Duration = DefaultCacheTTL
	}
	if d := c.TTL.Duration; d < MinCacheTTL || d > MaxCacheTTL {
		ps.add("cache.ttl", "must be between %s and %s, got %s (leave it out for %s)", MinCacheTTL, MaxCacheTTL, c.TTL, DefaultCacheTTL)
	}
	if c.MaxBytes.Bytes == 0 {
		c.MaxBytes.Bytes = DefaultCacheMaxBytes
	}
	if b := c.MaxBytes.Bytes; b < MinCacheMaxBytes || b > MaxCacheMaxBytes {
		ps.add("cache.maxBytes", "must be between %s and %s, got %s (leave it out for %s)", Size{Bytes: MinCacheMaxBytes}, Size{Bytes: MaxCacheMaxBytes}, c.MaxBytes, Size{Bytes: DefaultCacheMaxBytes})
	}
}
