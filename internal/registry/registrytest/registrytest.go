// Package registrytest is the conformance suite of the registry's
// interfaces: every implementation of registry.Store (Run) and of
// registry.Artifacts (RunArtifacts) must pass it. Each implementation runs
// it from its own tests.
package registrytest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/registry"
)

// SHA is the hex SHA-256 of b.
func SHA(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Package returns a package of model name with the artifact art and, when
// ref is not nil, a drift reference. It is built by hand, without parsing
// model.yaml, so the suite needs no runtime: the store keeps what it is
// given.
func Package(name string, art, ref []byte) *modelpkg.Package {
	m := modelpkg.Manifest{Name: name, Runtime: "linear", Artifact: "model.json",
		Input: modelpkg.Input{Schema: name + "-input@1"}, Output: modelpkg.Output{Schema: name + "-output@1"}}
	man := fmt.Sprintf("name: %s\nruntime: linear\nartifact: model.json\n", name)
	p := &modelpkg.Package{Spec: &modelpkg.Spec{Manifest: m}, ManifestYAML: []byte(man), Artifact: art, ArtifactSHA: SHA(art)}
	if ref != nil {
		p.Spec.Manifest.Drift = &modelpkg.Drift{Reference: "reference.jsonl"}
		p.Reference, p.ReferenceSHA = ref, SHA(ref)
	}
	p.Digest = SHA([]byte(man + p.ArtifactSHA + p.ReferenceSHA))
	return p
}

// Run runs the conformance suite of registry.Store. open returns a new,
// empty store for each subtest; it closes the store in t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) registry.Store) {
	ctx := context.Background()
	t.Run("PublishNumbersVersionsPerModel", func(t *testing.T) {
		s := open(t)
		tests := []struct {
			model, art string
			wantN      int
			created    bool
		}{
			{"fraud", "weights-1", 1, true},
			{"fraud", "weights-1", 1, false}, // identical: the same version
			{"fraud", "weights-2", 2, true},
			{"churn", "weights-1", 1, true}, // numbering is per model
			{"fraud", "weights-1", 1, false},
			{"fraud", "weights-3", 3, true},
		}
		for i, tc := range tests {
			v, created, err := s.Publish(ctx, Package(tc.model, []byte(tc.art), nil))
			if err != nil {
				t.Fatalf("publish %d (%s %s): %v", i, tc.model, tc.art, err)
			}
			if v.Model != tc.model || v.N != tc.wantN || created != tc.created {
				t.Errorf("publish %d (%s %s) = %s created=%v, want %s@%d created=%v", i, tc.model, tc.art, v.ID(), created, tc.model, tc.wantN, tc.created)
			}
		}
		vs, err := s.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, v := range vs {
			ids = append(ids, v.ID())
		}
		if got := strings.Join(ids, " "); got != "churn@1 fraud@1 fraud@2 fraud@3" {
			t.Errorf("List = %s, want churn@1 fraud@1 fraud@2 fraud@3 (by model, then version)", got)
		}
	})

	t.Run("PublishKeepsTheVersion", func(t *testing.T) {
		s := open(t)
		p := Package("fraud", []byte(`{"weights":[[1]]}`), nil)
		before := time.Now().Add(-time.Second)
		v, created, err := s.Publish(ctx, p)
		if err != nil || !created {
			t.Fatalf("publish: %v created=%v", err, created)
		}
		got, err := s.Get(ctx, "fraud", v.N)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []registry.Version{v, got} {
			if g.Model != "fraud" || g.N != 1 || g.Digest != p.Digest || g.ArtifactSHA != p.ArtifactSHA ||
				g.ArtifactBytes != int64(len(p.Artifact)) || g.Runtime != "linear" ||
				g.InputSchema != "fraud-input@1" || g.OutputSchema != "fraud-output@1" ||
				!bytes.Equal(g.Manifest, p.ManifestYAML) || g.State != registry.Published {
				t.Errorf("version = %+v, want the published package's fields, state published", g)
			}
			if g.CreatedAt.Before(before) || g.CreatedAt.After(time.Now().Add(time.Second)) {
				t.Errorf("CreatedAt = %v, want about now", g.CreatedAt)
			}
		}
		if _, err := s.Get(ctx, "fraud", 2); errs.CodeOf(err) != errs.NotFound || !strings.Contains(err.Error(), "fraud@2") {
			t.Errorf("Get(fraud@2) = %v, want not_found naming fraud@2", err)
		}
		if _, err := s.Get(ctx, "nobody", 1); errs.CodeOf(err) != errs.NotFound {
			t.Errorf("Get(nobody@1) = %v, want not_found", err)
		}
	})

	t.Run("StatesPersist", func(t *testing.T) {
		s := open(t)
		v, _, err := s.Publish(ctx, Package("fraud", []byte("a"), nil))
		if err != nil {
			t.Fatal(err)
		}
		other, _, err := s.Publish(ctx, Package("fraud", []byte("b"), nil))
		if err != nil {
			t.Fatal(err)
		}
		tm := registry.Timings{Load: 1500 * time.Microsecond, Golden: 2 * time.Millisecond, Warmup: 3 * time.Second}
		for _, st := range []struct {
			state  registry.State
			reason string
			t      registry.Timings
		}{
			{registry.Loading, "", registry.Timings{}},
			{registry.Validating, "", registry.Timings{Load: tm.Load}},
			{registry.Failed, "load fraud@1: artifact sha256 mismatch", tm},
			{registry.Ready, "", tm},
		} {
			if err := s.SetState(ctx, "fraud", v.N, st.state, st.reason, st.t); err != nil {
				t.Fatal(err)
			}
			got, err := s.Get(ctx, "fraud", v.N)
			if err != nil {
				t.Fatal(err)
			}
			if got.State != st.state || got.Reason != st.reason || got.Timings != st.t || got.StatedAt.IsZero() {
				t.Errorf("after SetState(%s, %q, %+v): state %s reason %q timings %+v stated %v", st.state, st.reason, st.t, got.State, got.Reason, got.Timings, got.StatedAt)
			}
		}
		vs, err := s.List(ctx)
		if err != nil || len(vs) != 2 {
			t.Fatalf("List = %v, %v", vs, err)
		}
		if vs[0].State != registry.Ready || vs[0].Timings != tm {
			t.Errorf("List shows %s %+v for fraud@1, want ready %+v", vs[0].State, vs[0].Timings, tm)
		}
		if vs[1].N != other.N || vs[1].State != registry.Published {
			t.Errorf("SetState of fraud@1 changed %s: %s", vs[1].ID(), vs[1].State)
		}
		if got, _ := s.Get(ctx, "fraud", v.N); got.Digest != v.Digest || got.ArtifactSHA != v.ArtifactSHA || !got.CreatedAt.Equal(v.CreatedAt) {
			t.Errorf("SetState changed the immutable fields: %+v, was %+v", got, v)
		}
	})

	t.Run("ArtifactsAndFiles", func(t *testing.T) {
		s := open(t)
		art, ref := []byte(`{"weights":[[0.5]]}`), []byte("{\"x\":1}\n{\"x\":2}\n")
		v, _, err := s.Publish(ctx, Package("churn", art, ref))
		if err != nil {
			t.Fatal(err)
		}
		got, err := registry.ReadArtifact(ctx, s, v.ArtifactSHA)
		if err != nil || !bytes.Equal(got, art) {
			t.Errorf("ReadArtifact = %q, %v; want the published artifact", got, err)
		}
		rc, size, err := s.Open(ctx, v.ArtifactSHA)
		if err != nil {
			t.Fatal(err)
		}
		rc.Close()
		if size != int64(len(art)) {
			t.Errorf("Open size = %d, want %d", size, len(art))
		}
		f, err := s.File(ctx, "churn", v.N, "drift.reference")
		if err != nil || !bytes.Equal(f, ref) {
			t.Errorf("File(drift.reference) = %q, %v; want the reference", f, err)
		}
		if f, err := s.File(ctx, "churn", v.N, "other"); f != nil || err != nil {
			t.Errorf("File(other) = %q, %v; want nil, nil", f, err)
		}
		w, _, err := s.Publish(ctx, Package("churn", []byte("no reference"), nil))
		if err != nil {
			t.Fatal(err)
		}
		if f, err := s.File(ctx, "churn", w.N, "drift.reference"); f != nil || err != nil {
			t.Errorf("File of a version without one = %q, %v; want nil, nil", f, err)
		}
		missing := SHA([]byte("never stored"))
		if _, err := registry.ReadArtifact(ctx, s, missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing[:12]) {
			t.Errorf("ReadArtifact(missing) = %v, want an error wrapping fs.ErrNotExist naming sha256:%s", err, missing[:12])
		}
	})

	t.Run("Policies", func(t *testing.T) {
		s := open(t)
		t1 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		t2 := t1.Add(time.Hour)
		p1, err := s.SetPolicy(ctx, registry.Policy{Model: "fraud", Targets: []registry.Target{{Version: 1, Weight: 100}}, CreatedAt: t1, Actor: "alice", Reason: "first", Diff: "fraud: +1 100%"}, -1)
		if err != nil {
			t.Fatal(err)
		}
		if p1.Version != 1 || !p1.CreatedAt.Equal(t1) {
			t.Errorf("first policy = %+v, want version 1 at %v", p1, t1)
		}
		// expect = the current version: written.
		targets := []registry.Target{{Version: 1, Weight: 90}, {Version: 2, Weight: 10}, {Version: 3, Shadow: true}}
		p2, err := s.SetPolicy(ctx, registry.Policy{Model: "fraud", Targets: targets, CreatedAt: t2, Actor: "bob", Reason: "canary", Diff: "fraud: 1 90%, +2 10%, +3 shadow"}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if p2.Version != 2 {
			t.Errorf("second policy version %d, want 2", p2.Version)
		}
		// expect = a stale version: refused, nothing written.
		_, err = s.SetPolicy(ctx, registry.Policy{Model: "fraud", Targets: []registry.Target{{Version: 2, Weight: 100}}, Actor: "carol", Reason: "stale"}, 1)
		if errs.CodeOf(err) != errs.AlreadyExists || !strings.Contains(err.Error(), "changed meanwhile") {
			t.Errorf("SetPolicy with a stale expected version = %v, want already_exists (changed meanwhile)", err)
		}
		if _, err := s.SetPolicy(ctx, registry.Policy{Model: "iris", Targets: []registry.Target{{Version: 1, Weight: 100}}}, 0); err != nil {
			t.Errorf("SetPolicy of a new model expecting 0: %v", err)
		}
		if _, err := s.SetPolicy(ctx, registry.Policy{Model: "churn"}, 3); errs.CodeOf(err) != errs.AlreadyExists {
			t.Errorf("SetPolicy of a new model expecting 3 = %v, want already_exists", err)
		}
		ps, err := s.Policies(ctx, "fraud")
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 2 || ps[0].Version != 1 || ps[1].Version != 2 {
			t.Fatalf("Policies(fraud) = %+v, want versions 1 and 2", ps)
		}
		if !reflect.DeepEqual(ps[1].Targets, targets) || ps[1].Actor != "bob" || ps[1].Reason != "canary" || ps[1].Diff != p2.Diff || !ps[1].CreatedAt.Equal(t2) || ps[1].Model != "fraud" {
			t.Errorf("stored policy = %+v, want %+v", ps[1], p2)
		}
		all, err := s.Policies(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, p := range all {
			ids = append(ids, fmt.Sprintf("%s/%d", p.Model, p.Version))
		}
		if got := strings.Join(ids, " "); got != "fraud/1 fraud/2 iris/1" {
			t.Errorf("Policies(\"\") = %s, want fraud/1 fraud/2 iris/1", got)
		}
		cur, err := s.Current(ctx)
		if err != nil {
			t.Fatal(err)
		}
		ids = nil
		for _, p := range cur {
			ids = append(ids, fmt.Sprintf("%s/%d", p.Model, p.Version))
		}
		if got := strings.Join(ids, " "); got != "fraud/2 iris/1" || !reflect.DeepEqual(cur[0].Targets, targets) {
			t.Errorf("Current = %s (%+v), want fraud/2 iris/1, the latest of each model", got, cur)
		}
		if ps, err := s.Policies(ctx, "nobody"); err != nil || len(ps) != 0 {
			t.Errorf("Policies(nobody) = %v, %v; want none", ps, err)
		}
		if p, err := s.SetPolicy(ctx, registry.Policy{Model: "iris"}, -1); err != nil || p.CreatedAt.IsZero() {
			t.Errorf("SetPolicy without CreatedAt = %+v, %v; want it set", p, err)
		}
	})

	t.Run("PolicyAt", func(t *testing.T) {
		s := open(t)
		t1 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		t2 := t1.Add(time.Hour)
		for i, at := range []time.Time{t1, t2} {
			if _, err := s.SetPolicy(ctx, registry.Policy{Model: "fraud", Targets: []registry.Target{{Version: i + 1, Weight: 100}}, CreatedAt: at}, -1); err != nil {
				t.Fatal(err)
			}
		}
		tests := []struct {
			at   time.Time
			want int // policy version; 0 = not found
		}{
			{t1.Add(-time.Microsecond), 0},
			{t1, 1},
			{t1.Add(30 * time.Minute), 1},
			{t2, 2},
			{t2.Add(24 * time.Hour), 2},
		}
		for _, tc := range tests {
			p, err := s.PolicyAt(ctx, "fraud", tc.at)
			if tc.want == 0 {
				if errs.CodeOf(err) != errs.NotFound {
					t.Errorf("PolicyAt(%v) = %+v, %v; want not_found", tc.at, p, err)
				}
				continue
			}
			if err != nil || p.Version != tc.want || p.Targets[0].Version != tc.want {
				t.Errorf("PolicyAt(%v) = %+v, %v; want policy %d", tc.at, p, err, tc.want)
			}
		}
		if _, err := s.PolicyAt(ctx, "nobody", t2); errs.CodeOf(err) != errs.NotFound {
			t.Errorf("PolicyAt(nobody) = %v, want not_found", err)
		}
	})

	t.Run("Events", func(t *testing.T) {
		s := open(t)
		t1 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		if _, err := s.SetPolicy(ctx, registry.Policy{Model: "fraud", Targets: []registry.Target{{Version: 1, Weight: 100}}, CreatedAt: t1, Actor: "alice", Reason: "first", Diff: "fraud: +1 100%"}, -1); err != nil {
			t.Fatal(err)
		}
		if err := s.Audit(ctx, registry.Event{Model: "fraud", At: t1.Add(time.Minute), Actor: "system", Action: "rollout", What: "fraud@2 canary 10%", Reason: "release"}); err != nil {
			t.Fatal(err)
		}
		if err := s.Audit(ctx, registry.Event{Model: "iris", Actor: "bob", Action: "rollout", What: "iris@1 promoted"}); err != nil {
			t.Fatal(err)
		}
		es, err := s.Events(ctx, "fraud")
		if err != nil {
			t.Fatal(err)
		}
		want := []registry.Event{
			{Model: "fraud", At: t1, Actor: "alice", Action: "policy", What: "fraud: +1 100%", Reason: "first"},
			{Model: "fraud", At: t1.Add(time.Minute), Actor: "system", Action: "rollout", What: "fraud@2 canary 10%", Reason: "release"},
		}
		if len(es) != len(want) {
			t.Fatalf("Events(fraud) = %+v, want %+v", es, want)
		}
		for i := range want {
			if es[i].Model != want[i].Model || !es[i].At.Equal(want[i].At) || es[i].Actor != want[i].Actor || es[i].Action != want[i].Action || es[i].What != want[i].What || es[i].Reason != want[i].Reason {
				t.Errorf("event %d = %+v, want %+v", i, es[i], want[i])
			}
		}
		es, err = s.Events(ctx, "iris")
		if err != nil || len(es) != 1 || es[0].At.IsZero() || es[0].What != "iris@1 promoted" {
			t.Errorf("Events(iris) = %+v, %v; want one event with its time set", es, err)
		}
		if _, err := s.SetPolicy(ctx, registry.Policy{Model: "fraud"}, 7); err == nil {
			t.Fatal("stale SetPolicy accepted")
		}
		if es, _ := s.Events(ctx, "fraud"); len(es) != 2 {
			t.Errorf("a refused SetPolicy logged an event: %+v", es)
		}
		if es, err := s.Events(ctx, "nobody"); err != nil || len(es) != 0 {
			t.Errorf("Events(nobody) = %v, %v; want none", es, err)
		}
	})

	t.Run("HistoryPages", func(t *testing.T) {
		s := open(t)
		for i := 0; i < 5; i++ {
			if _, err := s.SetPolicy(ctx, registry.Policy{Model: "fraud", Targets: []registry.Target{{Version: 1, Weight: 100}}, Reason: fmt.Sprint("p", i+1)}, -1); err != nil {
				t.Fatal(err)
			}
			if err := s.Audit(ctx, registry.Event{Model: "iris", Action: "rollout", What: "interleaved"}); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for after := 0; ; {
			ps, err := s.PolicyPage(ctx, "fraud", after, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(ps) == 0 {
				break
			}
			if len(ps) > 2 {
				t.Fatalf("a page of %d policies, limit 2", len(ps))
			}
			for _, p := range ps {
				got = append(got, p.Reason)
			}
			after = ps[len(ps)-1].Version
		}
		if fmt.Sprint(got) != "[p1 p2 p3 p4 p5]" {
			t.Errorf("policy pages: %v", got)
		}
		got = nil
		for after := int64(0); ; {
			es, err := s.EventPage(ctx, "fraud", after, 2)
			if err != nil {
				t.Fatal(err)
			}
			if len(es) == 0 {
				break
			}
			for _, e := range es {
				if e.Seq <= after {
					t.Fatalf("event Seq %d after %d: not increasing", e.Seq, after)
				}
				got = append(got, e.Reason)
				after = e.Seq
			}
		}
		if fmt.Sprint(got) != "[p1 p2 p3 p4 p5]" {
			t.Errorf("event pages: %v", got)
		}
		all, err := s.Events(ctx, "fraud")
		if err != nil || len(all) != 5 || all[0].Seq == 0 {
			t.Errorf("Events: %+v, %v", all, err)
		}
	})

	t.Run("Rollouts", func(t *testing.T) {
		s := open(t)
		if rs, err := s.Rollouts(ctx); err != nil || len(rs) != 0 {
			t.Errorf("Rollouts of an empty store = %v, %v", rs, err)
		}
		for _, r := range []struct{ model, state string }{
			{"fraud", `{"phase":"canary"}`},
			{"iris", `{"phase":"shadow"}`},
			{"fraud", `{"phase":"done"}`}, // replaces
		} {
			if err := s.SaveRollout(ctx, r.model, []byte(r.state)); err != nil {
				t.Fatal(err)
			}
		}
		rs, err := s.Rollouts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 2 || string(rs["fraud"]) != `{"phase":"done"}` || string(rs["iris"]) != `{"phase":"shadow"}` {
			t.Errorf("Rollouts = %q, want fraud done and iris shadow", rs)
		}
	})
}

// Corrupt replaces the stored bytes of sha with data, bypassing every
// check, as a failing disk or a hand edit would.
type Corrupt func(t *testing.T, sha string, data []byte)

// RunArtifacts runs the conformance suite of registry.Artifacts. open
// returns a new, empty store for each subtest and a way to corrupt it.
func RunArtifacts(t *testing.T, open func(t *testing.T) (registry.Artifacts, Corrupt)) {
	ctx := context.Background()
	art := []byte(`{"weights":[[0.5,-1.2,3.0]],"bias":[0.1],"link":"logistic"}`)
	sha := SHA(art)
	put := func(t *testing.T, a registry.Artifacts, sha string, b []byte) {
		t.Helper()
		if err := a.Put(ctx, sha, bytes.NewReader(b)); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}

	t.Run("RoundTrip", func(t *testing.T) {
		a, _ := open(t)
		put(t, a, sha, art)
		put(t, a, sha, art) // again: a no-op
		empty := []byte{}
		put(t, a, SHA(empty), empty)
		rc, size, err := a.Open(ctx, sha)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		if cerr := rc.Close(); cerr != nil {
			t.Errorf("Close: %v", cerr)
		}
		if err != nil || !bytes.Equal(got, art) || size != int64(len(art)) {
			t.Errorf("Open = %q (size %d), %v; want the artifact (size %d)", got, size, err, len(art))
		}
		if got, err := registry.ReadArtifact(ctx, a, SHA(empty)); err != nil || len(got) != 0 {
			t.Errorf("ReadArtifact(empty) = %q, %v", got, err)
		}
	})

	t.Run("PutRefusesWrongContent", func(t *testing.T) {
		a, _ := open(t)
		if err := a.Put(ctx, sha, strings.NewReader("something else")); err == nil {
			t.Fatal("Put of content that does not hash to sha succeeded")
		}
		if _, err := registry.ReadArtifact(ctx, a, sha); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after a refused Put, ReadArtifact = %v; want not exist", err)
		}
	})

	t.Run("Missing", func(t *testing.T) {
		a, _ := open(t)
		_, _, err := a.Open(ctx, sha)
		if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), sha[:12]) {
			t.Errorf("Open(missing) = %v, want an error wrapping fs.ErrNotExist naming sha256:%s", err, sha[:12])
		}
		if _, err := registry.ReadArtifact(ctx, a, sha); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadArtifact(missing) = %v, want not exist", err)
		}
	})

	t.Run("InvalidHash", func(t *testing.T) {
		a, _ := open(t)
		for _, bad := range []string{"", "abc", "../../etc/passwd", strings.ToUpper(sha), sha + "0", strings.Repeat("g", 64)} {
			if _, _, err := a.Open(ctx, bad); err == nil || !strings.Contains(err.Error(), "invalid artifact hash") {
				t.Errorf("Open(%q) = %v, want invalid artifact hash", bad, err)
			}
			if err := a.Put(ctx, bad, bytes.NewReader(art)); err == nil {
				t.Errorf("Put(%q) succeeded", bad)
			}
			if _, err := registry.ReadArtifact(ctx, a, bad); err == nil {
				t.Errorf("ReadArtifact(%q) succeeded", bad)
			}
		}
	})

	t.Run("Corrupted", func(t *testing.T) {
		flipped := bytes.Clone(art)
		flipped[3] ^= 1
		for name, data := range map[string][]byte{
			"flipped bit": flipped,
			"truncated":   art[:len(art)-1],
			"extended":    append(bytes.Clone(art), '\n'),
			"empty":       {},
		} {
			t.Run(name, func(t *testing.T) {
				a, corrupt := open(t)
				put(t, a, sha, art)
				corrupt(t, sha, data)
				_, err := registry.ReadArtifact(ctx, a, sha)
				if err == nil || !strings.Contains(err.Error(), "artifact sha256 mismatch") || !strings.Contains(err.Error(), sha) {
					t.Errorf("ReadArtifact of a corrupted artifact = %v, want an artifact sha256 mismatch naming %s", err, sha)
				}
				// Reading by hand: the error comes at the end, not io.EOF.
				rc, _, err := a.Open(ctx, sha)
				if err == nil {
					_, err = io.ReadAll(rc)
					rc.Close()
				}
				if err == nil || !strings.Contains(err.Error(), "artifact sha256 mismatch") {
					t.Errorf("reading a corrupted artifact: %v, want artifact sha256 mismatch", err)
				}
				// Putting the right content again repairs it.
				put(t, a, sha, art)
				if got, err := registry.ReadArtifact(ctx, a, sha); err != nil || !bytes.Equal(got, art) {
					t.Errorf("after Put repaired it: %q, %v", got, err)
				}
			})
		}
	})

	t.Run("Delete", func(t *testing.T) {
		a, _ := open(t)
		other := []byte("another artifact")
		put(t, a, sha, art)
		put(t, a, SHA(other), other)
		if err := a.Delete(ctx, sha); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		if _, err := registry.ReadArtifact(ctx, a, sha); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("after Delete, ReadArtifact = %v; want not exist", err)
		}
		if err := a.Delete(ctx, sha); err != nil {
			t.Errorf("Delete of a missing artifact = %v; want nil", err)
		}
		if got, err := registry.ReadArtifact(ctx, a, SHA(other)); err != nil || !bytes.Equal(got, other) {
			t.Errorf("Delete removed another artifact: %q, %v", got, err)
		}
		if err := a.Delete(ctx, "../../etc/passwd"); err == nil || !strings.Contains(err.Error(), "invalid artifact hash") {
			t.Errorf("Delete(bad hash) = %v, want invalid artifact hash", err)
		}
		put(t, a, sha, art) // stored again after a Delete
		if got, err := registry.ReadArtifact(ctx, a, sha); err != nil || !bytes.Equal(got, art) {
			t.Errorf("Put after Delete: %q, %v", got, err)
		}
	})

	t.Run("CancelledContext", func(t *testing.T) {
		a, _ := open(t)
		put(t, a, sha, art)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := registry.ReadArtifact(cctx, a, sha); !errors.Is(err, context.Canceled) {
			t.Errorf("ReadArtifact with a cancelled context = %v, want context.Canceled", err)
		}
	})
}
