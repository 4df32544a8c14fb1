// Package tenant owns callers' identities: the tenants file (API key hashes,
// allowed models, quotas), authentication of a bearer key, the per-model
// permission check and the per-tenant token bucket counted in instances.
// Keys are stored and compared only as SHA-256 hashes; a key is never
// logged. Without a tenants file there is one implicit tenant, "default",
// with no authentication and no quota.
package tenant

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/strictyaml"
)

// File is the tenants file.
type File struct {
	Tenants []Config `yaml:"tenants"`
}

// Config is one tenant in the file.
type Config struct {
	Name   string   `yaml:"name"`
	Keys   []string `yaml:"keys"`
	Models []string `yaml:"models"`
	Quota  *Quota   `yaml:"quota,omitempty"`
	Admin  bool     `yaml:"admin,omitempty"`
}

// Quota is a token bucket in instances.
type Quota struct {
	InstancesPerSecond float64 `yaml:"instancesPerSecond"`
	Burst              float64 `yaml:"burst"`
}

// Tenant is an authenticated caller.
type Tenant struct {
	Name   string
	Admin  bool
	models []string // globs
	bucket *Bucket  // nil: unlimited
}

// Default is the implicit tenant when no tenants file is given.
var Default = &Tenant{Name: "default", Admin: true, models: []string{"*"}}

// Allowed reports whether the tenant may call model.
func (t *Tenant) Allowed(model string) bool {
	for _, g := range t.models {
		if ok, _ := path.Match(g, model); ok {
			return true
		}
	}
	return false
}

// Check returns a 403 error if the tenant may not call model.
func (t *Tenant) Check(model string) error {
	if !t.Allowed(model) {
		return errs.New(errs.PermissionDenied, "tenant %q may not call model %q", t.Name, model)
	}
	return nil
}

// CheckControl returns a 403 error naming the model if the tenant may not
// act on model through the control API: verb says what it tried
// ("publish", "read the records of"). The same globs as Check decide: a
// tenant (admin or not) acts only on its own models.
func (t *Tenant) CheckControl(verb, model string) error {
	if !t.Allowed(model) {
		return errs.New(errs.PermissionDenied, "tenant %q may not %s model %q: it is not among the tenant's models in the tenants file", t.Name, verb, model)
	}
	return nil
}

// Models returns the tenant's model globs (a copy).
func (t *Tenant) Models() []string { return append([]string(nil), t.models...) }

// AllModels reports whether the tenant's globs match every model name
// ("*"), so a listing across models needs no per-model filter.
func (t *Tenant) AllModels() bool {
	for _, g := range t.models {
		if g == "*" {
			return true
		}
	}
	return false
}

// Take spends n instances of the tenant's quota, or refuses with 429 and
// Retry-After. Refund gives them back when a request is refused later.
func (t *Tenant) Take(n int, now time.Time) error {
	if t.bucket == nil {
		return nil
	}
	if float64(n) > t.bucket.Burst {
		return errs.Field(errs.TooManyInstances, "instances", "%d instances exceed tenant %q's quota burst of %s: such a request can never pass; split it", n, t.Name, plain(t.bucket.Burst))
	}
	if ok, wait := t.bucket.Take(float64(n), now); !ok {
		e := errs.New(errs.QuotaExceeded, "tenant %q is over its quota of %s instances/s (burst %s); request has %d instances", t.Name, plain(t.bucket.Rate), plain(t.bucket.Burst), n)
		e.RetryAfter = time.Duration(math.Ceil(wait.Seconds())) * time.Second
		if e.RetryAfter < time.Second {
			e.RetryAfter = time.Second
		}
		return e
	}
	return nil
}

// Refund returns n instances to the tenant's bucket.
func (t *Tenant) Refund(n int) {
	if t.bucket != nil {
		t.bucket.Refund(float64(n))
	}
}

// Set is the loaded tenants: nil means "no tenants file" (open mode).
type Set struct {
	byHash  map[[32]byte]*Tenant
	tenants []*Tenant
}

// Lookup returns the tenant of that name: with no tenants file (a nil
// Set) the one implicit tenant, Default. A batch job runs as its
// submitter, found again by name when it runs.
func (s *Set) Lookup(name string) (*Tenant, bool) {
	if s == nil {
		return Default, name == Default.Name
	}
	for _, t := range s.tenants {
		if t.Name == name {
			return t, true
		}
	}
	return nil, false
}

// Burst is the most instances one request of the tenant may hold (its
// quota's burst); ok is false when the tenant has no quota.
func (t *Tenant) Burst() (burst float64, ok bool) {
	if t.bucket == nil {
		return 0, false
	}
	return t.bucket.Burst, true
}

// Names lists the tenants in file order.
func (s *Set) Names() []string {
	if s == nil {
		return []string{Default.Name}
	}
	out := make([]string, len(s.tenants))
	for i, t := range s.tenants {
		out[i] = t.Name
	}
	return out
}

// Authenticate resolves an Authorization header. With no tenants file every
// caller is the default tenant.
func (s *Set) Authenticate(authorization string) (*Tenant, error) {
	if s == nil {
		return Default, nil
	}
	key, ok := strings.CutPrefix(authorization, "Bearer ")
	if !ok || key == "" {
		return nil, &errs.Error{Code: errs.Unauthenticated, Message: "missing API key: send Authorization: Bearer KEY"}
	}
	t, ok := s.byHash[sha256.Sum256([]byte(strings.TrimSpace(key)))]
	if !ok {
		return nil, &errs.Error{Code: errs.Unauthenticated, Message: "invalid API key"}
	}
	return t, nil
}

var (
	nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	keyRE  = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// Load reads and validates a tenants file.
func Load(file string) (*Set, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read tenants file: %w", err)
	}
	return Parse(file, data)
}

// Parse validates a tenants file's content.
func Parse(file string, data []byte) (*Set, error) {
	var f File
	idx, err := strictyaml.Decode(file, data, &f)
	if err != nil {
		return nil, err
	}
	var probs []strictyaml.Problem
	add := func(p, format string, args ...any) {
		probs = append(probs, strictyaml.Problem{Line: idx.Line(p), Path: p, Message: fmt.Sprintf(format, args...)})
	}
	s := &Set{byHash: map[[32]byte]*Tenant{}}
	names := map[string]bool{}
	if len(f.Tenants) == 0 {
		add("tenants", "must list at least one tenant")
	}
	for i, c := range f.Tenants {
		p := fmt.Sprintf("tenants[%d]", i)
		switch {
		case !nameRE.MatchString(c.Name):
			add(p+".name", "%q is not a valid tenant name (lowercase letters, digits, '-' and '_')", c.Name)
		case names[c.Name]:
			add(p+".name", "duplicate tenant %q", c.Name)
		}
		names[c.Name] = true
		t := &Tenant{Name: c.Name, Admin: c.Admin, models: c.Models}
		if len(c.Keys) == 0 {
			add(p+".keys", "needs at least one key hash (run `sluice tenant key` to make one)")
		}
		for j, k := range c.Keys {
			kp := fmt.Sprintf("%s.keys[%d]", p, j)
			if !keyRE.MatchString(k) {
				add(kp, "must be \"sha256:\" and 64 lowercase hex digits (the SHA-256 of the key, never the key itself; run `sluice tenant key`)")
				continue
			}
			var h [32]byte
			hex.Decode(h[:], []byte(k[len("sha256:"):]))
			if other, dup := s.byHash[h]; dup {
				add(kp, "the same key hash is already given to tenant %q", other.Name)
			}
			s.byHash[h] = t
		}
		if len(c.Models) == 0 {
			add(p+".models", "must list the models (names or globs like \"iris*\") this tenant may call")
		}
		for j, g := range c.Models {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				add(fmt.Sprintf("%s.models[%d]", p, j), "%q is not a valid name or glob", g)
			}
		}
		if q := c.Quota; q != nil {
			if !(q.InstancesPerSecond > 0) || math.IsInf(q.InstancesPerSecond, 0) {
				add(p+".quota.instancesPerSecond", "must be a number > 0, got %v", q.InstancesPerSecond)
			}
			if q.Burst == 0 {
				q.Burst = q.InstancesPerSecond
			}
			if !(q.Burst >= 1) || math.IsInf(q.Burst, 0) {
				add(p+".quota.burst", "must be >= 1, got %v", q.Burst)
			}
			t.bucket = NewBucket(q.InstancesPerSecond, q.Burst, time.Now())
		}
		s.tenants = append(s.tenants, t)
	}
	if len(probs) > 0 {
		return nil, &strictyaml.Error{File: file, Problems: probs}
	}
	return s, nil
}

// NewKey makes a random API key and the line to paste into a tenants file.
func NewKey() (key, hashLine string) {
	var b [24]byte
	_, _ = rand.Read(b[:])
	key = "sk_" + hex.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(key))
	return key, "sha256:" + hex.EncodeToString(sum[:])
}

// Bucket is a token bucket. Its arithmetic is pure given the times passed in.
type Bucket struct {
	Rate, Burst float64

	mu     sync.Mutex // guards tokens, last
	tokens float64
	last   time.Time
}

// NewBucket returns a full bucket.
func NewBucket(rate, burst float64, now time.Time) *Bucket {
	return &Bucket{Rate: rate, Burst: burst, tokens: burst, last: now}
}

// Take removes n tokens if there are enough; otherwise it reports how long
// until there will be. A request larger than the burst can never pass.
func (b *Bucket) Take(n float64, now time.Time) (bool, time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if now.After(b.last) {
		b.tokens = math.Min(b.Burst, b.tokens+now.Sub(b.last).Seconds()*b.Rate)
		b.last = now
	}
	if n <= b.tokens {
		b.tokens -= n
		return true, 0
	}
	need := math.Min(n, b.Burst) - b.tokens
	return false, time.Duration(need / b.Rate * float64(time.Second))
}

// Refund puts n tokens back, up to the burst.
func (b *Bucket) Refund(n float64) {
	b.mu.Lock()
	b.tokens = math.Min(b.Burst, b.tokens+n)
	b.mu.Unlock()
}

// plain prints a quota figure in decimal digits, never with an exponent.
func plain(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
