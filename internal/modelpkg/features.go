package modelpkg

import (
	"fmt"
	"math"
	"time"

	"github.com/sluiceml/sluice/internal/schema"
)

// Features is model.yaml features: the entity a request names and the
// input fields filled from that entity's stored features (memory, then
// Redis, then PostgreSQL) before the row is validated. Parse fills in the
// defaults.
type Features struct {
	// Entity is the request's input field that names the entity (a card,
	// a user). It is either an input field of the schema of type int (the
	// model sees it too) or no schema field at all: then it is read from
	// the instance and removed before validation.
	Entity string `yaml:"entity"`
	// EntityType is string (default) or int; an entity that is a schema
	// field takes that field's type (int).
	EntityType string `yaml:"entityType,omitempty"`
	// View names the stored features: the Redis hash prefix (VIEW:ENTITY)
	// and the PostgreSQL table.
	View string `yaml:"view"`
	// Fields are the input fields filled, each with the default used when
	// the entity is unknown, the field absent or a store too slow.
	Fields []FeatureField `yaml:"fields"`
	// MaxAge: stored values older than this are served and flagged stale
	// (0: never stale).
	MaxAge Duration `yaml:"maxAge,omitempty"`
	// Timeout is the enrichment's share of the request's deadline (it gets
	// the lesser of this and what is left of the deadline); default 10ms.
	Timeout Duration `yaml:"timeout,omitempty"`
	// Memory bounds the in-process tier of this view.
	Memory FeatureMemory `yaml:"memory,omitempty"`
}

// FeatureField is one filled input field and its default.
type FeatureField struct {
	Name    string   `yaml:"name"`
	Default *float64 `yaml:"default"`
}

// FeatureMemory is features.memory: the in-process tier's bounds.
type FeatureMemory struct {
	// MaxBytes bounds the tier's entries (keys, values, timestamps and
	// their bookkeeping); default 16MiB; "0" is refused (use a small size).
	MaxBytes *Size `yaml:"maxBytes,omitempty"`
	// TTL is how long an entry read from a store is served from memory
	// before the store is asked again; default 1s.
	TTL Duration `yaml:"ttl,omitempty"`
}

// Features defaults and bounds.
const (
	DefaultFeatureTimeout   = 10 * time.Millisecond
	DefaultFeatureMemory    = 16 << 20
	DefaultFeatureMemoryTTL = time.Second
	MaxFeatureFields        = 1024
	MaxIdentifier           = 63 // PostgreSQL's identifier length
)

// Entity types.
const (
	EntityString = "string"
	EntityInt    = "int"
)

// ValidIdentifier says whether s can name a view, a column or a Redis key
// prefix as it is: a letter or '_', then letters, digits or '_', at most
// 63 characters. pgfeat quotes it anyway.
func ValidIdentifier(s string) bool {
	if len(s) == 0 || len(s) > MaxIdentifier {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// FieldNames is the filled fields' names in order.
func (f *Features) FieldNames() []string {
	out := make([]string, len(f.Fields))
	for i, ff := range f.Fields {
		out[i] = ff.Name
	}
	return out
}

// EntityInSchema says whether the entity is also a schema field (kept in
// the instance for the model) rather than removed before validation.
func (f *Features) EntityInSchema(inputs []schema.Field) bool {
	for _, in := range inputs {
		if in.Name == f.Entity {
			return true
		}
	}
	return false
}

// checkFeatures checks features: against the schema's input fields and
// fills in its defaults.
func checkFeatures(ps *problems, f *Features, inputs []schema.Field) {
	byName := map[string]schema.Field{}
	for _, in := range inputs {
		byName[in.Name] = in
	}
	switch in, inSchema := byName[f.Entity]; {
	case f.Entity == "":
		ps.add("features.entity", "is required: the request's input field naming the entity whose features are filled (e.g. cardId)")
	case !ValidIdentifier(f.Entity):
		ps.add("features.entity", "%q is not a field name (a letter or '_', then letters, digits or '_', at most %d characters)", f.Entity, MaxIdentifier)
	case inSchema && in.Type != schema.TypeInt:
		ps.add("features.entity", "%q is an input field of type %s: an entity that the model also reads must be of type int (or remove it from input.fields: it is then read from the request and not given to the model)", f.Entity, in.Type)
	case inSchema && f.EntityType != "" && f.EntityType != EntityInt:
		ps.add("features.entityType", "%q is an input field of type int: entityType must be int or left out", f.Entity)
	}
	if _, inSchema := byName[f.Entity]; inSchema {
		f.EntityType = EntityInt
	}
	if f.EntityType == "" {
		f.EntityType = EntityString
	}
	if f.EntityType != EntityString && f.EntityType != EntityInt {
		ps.add("features.entityType", "unknown entity type %q (one of: string, int)", f.EntityType)
	}
	if f.View == "" {
		ps.add("features.view", "is required: the Redis key prefix (VIEW:ENTITY) and PostgreSQL table the features are read from")
	} else if !ValidIdentifier(f.View) {
		ps.add("features.view", "%q is not a valid view name (a letter or '_', then letters, digits or '_', at most %d characters: it names a PostgreSQL table)", f.View, MaxIdentifier)
	}
	if len(f.Fields) == 0 {
		ps.add("features.fields", "must name at least one input field to fill, each with its default")
	}
	if len(f.Fields) > MaxFeatureFields {
		ps.add("features.fields", "has %d fields, at most %d are allowed", len(f.Fields), MaxFeatureFields)
	}
	seen := map[string]bool{}
	for i, ff := range f.Fields {
		p := fmt.Sprintf("features.fields[%d]", i)
		in, ok := byName[ff.Name]
		switch {
		case ff.Name == "":
			ps.add(p+".name", "is required: an input field of the schema")
			continue
		case seen[ff.Name]:
			ps.add(p+".name", "duplicate field %q", ff.Name)
		case ff.Name == f.Entity:
			ps.add(p+".name", "%q is the entity: it names whose features are filled and cannot be filled itself", ff.Name)
		case !ok:
			ps.add(p+".name", "%q is not an input field: add it to input.fields (type float or int) so the model reads it", ff.Name)
		case !ValidIdentifier(ff.Name):
			ps.add(p+".name", "%q cannot name a stored column (at most %d characters)", ff.Name, MaxIdentifier)
		case in.Type != schema.TypeFloat && in.Type != schema.TypeInt:
			ps.add(p+".name", "%q is of type %s: filled fields are numbers (type float or int), as stored values are decimal strings", ff.Name, in.Type)
		}
		seen[ff.Name] = true
		switch {
		case ff.Default == nil:
			ps.add(p+".default", "is required: the value %q takes when the entity is unknown or a store is slow (e.g. default: 0)", ff.Name)
		case math.IsNaN(*ff.Default) || math.IsInf(*ff.Default, 0):
			ps.add(p+".default", "must be a finite number")
		case ok && in.Type == schema.TypeInt && *ff.Default != math.Trunc(*ff.Default):
			ps.add(p+".default", "%q is of type int: the default must be an integer, got %v", ff.Name, *ff.Default)
		case ok && in.Min != nil && *ff.Default < *in.Min, ok && in.Max != nil && *ff.Default > *in.Max:
			ps.add(p+".default", "%v is outside %q's bounds in input.fields", *ff.Default, ff.Name)
		}
	}
	if f.MaxAge.Duration < 0 {
		ps.add("features.maxAge", "must be >= 0 (0: values are never stale), got %s", f.MaxAge)
	}
	if f.Timeout.Duration == 0 {
		f.Timeout.Duration = DefaultFeatureTimeout
	}
	if f.Timeout.Duration < 0 || f.Timeout.Duration > time.Minute {
		ps.add("features.timeout", "must be between 1ns and 1m (the enrichment's share of the deadline), got %s", f.Timeout)
	}
	if f.Memory.MaxBytes == nil {
		f.Memory.MaxBytes = &Size{Bytes: DefaultFeatureMemory}
	}
	if b := f.Memory.MaxBytes.Bytes; b <= 0 || b > 1<<40 {
		ps.add("features.memory.maxBytes", "must be between 1B and 1TiB, got %d bytes (a small size keeps few entries; the tier cannot be turned off)", b)
	}
	if f.Memory.TTL.Duration == 0 {
		f.Memory.TTL.Duration = DefaultFeatureMemoryTTL
	}
	if f.Memory.TTL.Duration < 0 || f.Memory.TTL.Duration > 24*time.Hour {
		ps.add("features.memory.ttl", "must be between 1ns and 24h, got %s", f.Memory.TTL)
	}
}
