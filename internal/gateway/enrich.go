package gateway

import (
	"context"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/features"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/schema"
)

// Enricher fills one version's features: the stored values of the named
// fields for each entity, within min(features.timeout, what is left of
// ctx's deadline), each with its origin (features.Enricher implements it).
type Enricher interface {
	Fields() []string
	Lookup(ctx context.Context, entities []string, out []features.Result)
}

// FeatureSet gives a version's Enricher (nil: the version declares no
// features:).
type FeatureSet interface {
	Enricher(spec *modelpkg.Spec) Enricher
}

// Enriched is what enrichment did to a request: per instance, its entity
// ("" when the caller sent every filled field) and each filled field's
// value and origin.
type Enriched struct {
	Fields   []string
	Entities []string
	Values   [][]float64
	Origins  [][]features.Origin
}

// MaxEntity bounds an entity's length in bytes (it is recorded).
const MaxEntity = 256

// Features is a FeatureSet over a features.Set: one features.Enricher per
// version's spec (shared by specs that read a view the same way).
type Features struct {
	Set *features.Set

	mu   sync.Mutex // guards byId
	byID map[*modelpkg.Spec]Enricher
}

// maxSpecs bounds Features' memo of specs (past it, it starts again).
const maxSpecs = 4096

// Enricher is the enricher of spec's features: (nil without features:).
func (f *Features) Enricher(spec *modelpkg.Spec) Enricher {
	ff := spec.Manifest.Features
	if ff == nil || f == nil || f.Set == nil {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.byID[spec]; ok {
		return e
	}
	if f.byID == nil || len(f.byID) >= maxSpecs {
		f.byID = map[*modelpkg.Spec]Enricher{}
	}
	defs := make([]float64, len(ff.Fields))
	for i, fl := range ff.Fields {
		if fl.Default != nil {
			defs[i] = *fl.Default
		}
	}
	var mem int64 = modelpkg.DefaultFeatureMemory
	if ff.Memory.MaxBytes != nil {
		mem = ff.Memory.MaxBytes.Bytes
	}
	e := f.Set.Enricher(features.ViewConfig{
		View:     features.View{Name: ff.View, Entity: ff.Entity, EntityInt: ff.EntityType == modelpkg.EntityInt, Fields: ff.FieldNames()},
		Defaults: defs, MaxAge: ff.MaxAge.Duration, Timeout: ff.Timeout.Duration, MemoryBytes: mem, MemoryTTL: ff.Memory.TTL.Duration,
	})
	f.byID[spec] = e
	return e
}

// enrich fills the version's features into the request's instances: the
// entity read (and removed, unless the model reads it), the fields the
// caller sent kept (origin request), the others looked up. Without
// features: rows come back as they are.
func (g *Gateway) enrich(ctx context.Context, spec *modelpkg.Spec, rows Rows) (Rows, *Enriched, error) {
	ff := spec.Manifest.Features
	if ff == nil {
		return rows, nil, nil
	}
	var en Enricher
	if g.Features != nil {
		en = g.Features.Enricher(spec)
	}
	if en == nil {
		return nil, nil, errs.New(errs.Unavailable, "the model fills %s from view %s but this server has no feature store (--features-redis, --features-postgres)", ff.FieldNames(), ff.View)
	}
	insts := rows.Instances()
	n := len(insts)
	fields := en.Fields()
	fieldIdx := make(map[string]int, len(fields))
	for i, f := range fields {
		fieldIdx[f] = i
	}
	keepEntity := ff.EntityInSchema(spec.Manifest.Input.Fields)
	e := &Enriched{Fields: fields, Entities: make([]string, n), Values: make([][]float64, n), Origins: make([][]features.Origin, n)}
	flatV := make([]float64, n*len(fields))
	flatO := make([]features.Origin, n*len(fields))
	sent := make([]bool, n*len(fields))
	var ents []string
	var who []int
	for i, inst := range insts {
		e.Values[i] = flatV[i*len(fields) : (i+1)*len(fields) : (i+1)*len(fields)]
		e.Origins[i] = flatO[i*len(fields) : (i+1)*len(fields) : (i+1)*len(fields)]
		s := sent[i*len(fields) : (i+1)*len(fields)]
		entity, hasEntity, nsent := "", false, 0
		for _, m := range inst {
			if m.Name == ff.Entity {
				v, err := entityOf(i, ff, m.Value)
				if err != nil {
					return nil, nil, err
				}
				entity, hasEntity = v, true
				continue
			}
			if k, ok := fieldIdx[m.Name]; ok && m.Value.Kind != schema.Null && !s[k] {
				s[k] = true
				nsent++
				if x, err := strconv.ParseFloat(m.Value.Text, 64); err == nil {
					e.Values[i][k] = x
				}
				e.Origins[i][k] = features.Request
			}
		}
		if nsent == len(fields) {
			continue // the caller sent every filled field: nothing to look up
		}
		if !hasEntity {
			return nil, nil, errs.Field(errs.InvalidArgument, schema.Path{Prefix: "instances", Index: i}.String()+"."+ff.Entity,
				"is required: the entity whose features fill %v (or send every one of those fields)", fields)
		}
		e.Entities[i] = entity
		ents = append(ents, entity)
		who = append(who, i)
	}
	if len(ents) > 0 {
		res := make([]features.Result, len(ents))
		en.Lookup(ctx, ents, res)
		defaults, stale := 0, 0
		for j, i := range who {
			s := sent[i*len(fields) : (i+1)*len(fields)]
			for k := range fields {
				if !s[k] {
					e.Values[i][k], e.Origins[i][k] = res[j].Values[k], res[j].Origins[k]
					switch res[j].Origins[k] {
					case features.Default:
						defaults++
					case features.Stale:
						stale++
					}
				}
			}
		}
		if g.Metrics != nil && defaults+stale > 0 {
			// Counted here, not by the enricher: a value the caller sent
			// is neither, whatever the store holds.
			g.Metrics.FeatureFilled(ff.View, defaults, stale)
		}
	}
	out := make([]schema.Instance, n)
	for i, inst := range insts {
		s := sent[i*len(fields) : (i+1)*len(fields)]
		ni := make(schema.Instance, 0, len(inst)+len(fields))
		for _, m := range inst {
			if m.Name == ff.Entity && !keepEntity {
				continue
			}
			if k, ok := fieldIdx[m.Name]; ok && !s[k] {
				continue // null: filled instead
			}
			ni = append(ni, m)
		}
		for k, f := range fields {
			if !s[k] {
				ni = append(ni, schema.Member{Name: f, Value: schema.Value{Kind: schema.Number, Text: features.FormatValue(e.Values[i][k])}})
			}
		}
		out[i] = ni
	}
	return instanceRows(out), e, nil
}

// entityOf reads instance i's entity: a string (at most MaxEntity bytes),
// or for an int entity an integer (canonical decimal).
func entityOf(i int, ff *modelpkg.Features, v schema.Value) (string, error) {
	path := schema.Path{Prefix: "instances", Index: i}.String() + "." + ff.Entity
	if ff.EntityType == modelpkg.EntityInt {
		if v.Kind != schema.Number {
			return "", errs.Field(errs.InvalidArgument, path, "must be an integer (the entity id), got %s", kindName(v))
		}
		n, err := strconv.ParseInt(v.Text, 10, 64)
		if err != nil {
			return "", errs.Field(errs.InvalidArgument, path, "must be an integer that fits in 64 bits (the entity id)")
		}
		return strconv.FormatInt(n, 10), nil
	}
	if v.Kind != schema.String {
		return "", errs.Field(errs.InvalidArgument, path, "must be a string (the entity id), got %s", kindName(v))
	}
	if len(v.Text) == 0 || len(v.Text) > MaxEntity || !utf8.ValidString(v.Text) {
		return "", errs.Field(errs.InvalidArgument, path, "must be 1 to %d bytes of UTF-8 (the entity id), got %d bytes", MaxEntity, len(v.Text))
	}
	return v.Text, nil
}

func kindName(v schema.Value) string {
	switch v.Kind {
	case schema.Null:
		return "null"
	case schema.Number:
		return "a number"
	case schema.String:
		return "a string"
	case schema.Bool:
		return "a boolean"
	}
	return "an object or array"
}

// Sources is each instance's filled fields and their origins, as the
// answers render them ({"declines5m": "redis", …} per instance).
func (e *Enriched) Sources(i int) (fields []string, origins []features.Origin) {
	return e.Fields, e.Origins[i]
}

// record is the enrichment as the prediction record keeps it: per
// instance its entity, the filled values and their origins (canonical
// JSON).
func (e *Enriched) record() []byte {
	b := []byte{'['}
	for i := range e.Values {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"entity":`...)
		b = records.AppendCanonicalString(b, e.Entities[i])
		b = append(b, `,"values":{`...)
		for k, f := range e.Fields {
			if k > 0 {
				b = append(b, ',')
			}
			b = records.AppendCanonicalString(b, f)
			b = append(b, ':')
			b = strconv.AppendFloat(b, e.Values[i][k], 'g', -1, 64)
		}
		b = append(b, `},"sources":{`...)
		for k, f := range e.Fields {
			if k > 0 {
				b = append(b, ',')
			}
			b = records.AppendCanonicalString(b, f)
			b = append(b, ':', '"')
			b = append(b, e.Origins[i][k].String()...)
			b = append(b, '"')
		}
		b = append(b, "}}"...)
	}
	return append(b, ']')
}

// AppendSources appends the featureSources array: one object per
// instance mapping each filled field to its origin.
func (e *Enriched) AppendSources(b []byte) []byte {
	b = append(b, '[')
	for i := range e.Origins {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '{')
		for k, f := range e.Fields {
			if k > 0 {
				b = append(b, ',')
			}
			b = records.AppendCanonicalString(b, f)
			b = append(b, ':', '"')
			b = append(b, e.Origins[i][k].String()...)
			b = append(b, '"')
		}
		b = append(b, '}')
	}
	return append(b, ']')
}

// sameFeatures says whether two versions' features: fill the same fields
// from the same entity and view (so one's enriched rows serve the other).
func sameFeatures(a, b *modelpkg.Features) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Entity != b.Entity || a.View != b.View || len(a.Fields) != len(b.Fields) {
		return false
	}
	for i := range a.Fields {
		if a.Fields[i].Name != b.Fields[i].Name {
			return false
		}
	}
	return true
}
