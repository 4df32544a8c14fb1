// Package control is Sluice's control plane: it publishes packages into the
// registry, loads versions (verify artifact hash → load → golden examples →
// warmup → ready), starts their serving.Servers, keeps each model's
// deployment policy, drives rollouts (a pure state machine, Advance) and
// publishes the routing snapshot the data plane reads. It never sits on the
// predict path: if the store fails, serving goes on with the last snapshot.
package control

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluiceml/sluice/internal/abstat"
	"github.com/sluiceml/sluice/internal/drift"
	"github.com/sluiceml/sluice/internal/errs"
	"github.com/sluiceml/sluice/internal/modelpkg"
	"github.com/sluiceml/sluice/internal/registry"
	"github.com/sluiceml/sluice/internal/routing"
	"github.com/sluiceml/sluice/internal/serving"
	"github.com/sluiceml/sluice/internal/telemetry"
	"github.com/sluiceml/sluice/internal/vstats"
)

// Config is what a Controller is built from. It is read once, by New: a
// running controller has no setting to change (a change notification
// from the store may start work at once, so nothing may be set after).
type Config struct {
	Store registry.Store
	// Host runs the versions (nil: replicas in this process, LocalHost).
	Host   Host
	Logger *slog.Logger // nil: slog.Default()
	// Metrics receives load and serving events (nil: none).
	Metrics *telemetry.Metrics
	// NoDrift turns drift monitors off even for versions that declare one.
	NoDrift bool
	// DeleteQuiet is how long a model must have had no predict call before
	// DeleteModel accepts it (0: no such check; sluice serve's default is
	// DefaultDeleteQuiet). Negative is refused by New's caller.
	DeleteQuiet time.Duration
	// Unrouted, when set, is called with a version's id ("fraud@3") once
	// it has left the routing snapshot for good (archived, deleted or
	// quarantined, here or by another gateway): the gateway drops its
	// prediction cache. It must be quick and must not call the
	// controller.
	Unrouted func(id string)
	// CheckSpec (nil: none) may refuse a version before it is loaded for
	// what this server lacks (features: without a feature store); its
	// error is the version's failure reason.
	CheckSpec func(*modelpkg.Spec) error
	// Changed (nil: none) is told of every change the controller makes
	// or adopts from the store, for the event feed (GET /v1/events): a
	// deployment's new policy (made here or by another gateway), a
	// rollout's new state or gate values, a version's new state, an
	// audit entry written here. It may be called with the controller's
	// locks held, so it must be quick, must not block and must not call
	// the controller (events.Hub.Publish is so).
	Changed func(Change)
	// Outcomes (nil: none) compares a rollout's candidate with its
	// baseline on an outcome metric for a plan with gates.metric:
	// outcomes of predictions made since since, the always-valid p-value's
	// running minimum carried in prevP. The driver calls it at most once
	// a second, without its locks.
	Outcomes OutcomeSource
}

// OutcomeSource is Config.Outcomes.
type OutcomeSource func(ctx context.Context, model, metric, direction string, baseline, candidate int, since time.Time, prevP float64) (abstat.Result, error)

// Change is one change Config.Changed is told of. Kind says which fields
// are set: "deployment" Policy (Adopted: read from the store, made by
// another gateway), "rollout" Rollout (a copy), "version" Version, State,
// Reason, "audit" Audit.
type Change struct {
	Kind    string
	Model   string
	Policy  registry.Policy
	Adopted bool
	Rollout *Rollout
	Version int
	State   registry.State
	Reason  string
	Audit   registry.Event
}

// changed tells Config.Changed of ch.
func (c *Controller) changed(ch Change) {
	if c.onChange != nil {
		c.onChange(ch)
	}
}

// audit writes e to the store's audit trail and tells Config.Changed.
func (c *Controller) audit(ctx context.Context, e registry.Event) error {
	if e.At.IsZero() {
		e.At = time.Now().UTC()
	}
	if err := c.store.Audit(ctx, e); err != nil {
		return err
	}
	c.changed(Change{Kind: "audit", Model: e.Model, Audit: e})
	return nil
}

// policyChanged tells Config.Changed of p, and of the audit entry the
// store wrote with it unless another gateway made it.
func (c *Controller) policyChanged(p registry.Policy, adopted bool) {
	c.changed(Change{Kind: "deployment", Model: p.Model, Policy: p, Adopted: adopted})
	if !adopted {
		c.changed(Change{Kind: "audit", Model: p.Model, Audit: registry.Event{Model: p.Model, At: p.CreatedAt, Actor: p.Actor, Action: "policy", What: p.Diff, Reason: p.Reason}})
	}
}

// Controller owns loaded versions and the routing snapshot.
type Controller struct {
	store  registry.Store
	host   Host
	log    *slog.Logger
	Table  *routing.Holder
	ctx    context.Context // cancelled by Close: stops loads
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sem    chan struct{} // bounds concurrent loads

	// Stats are the live per-version figures the gateway records and
	// rollout gates read.
	Stats *vstats.Set

	// From Config, never changed after New.
	metrics     *telemetry.Metrics
	noDrift     bool
	deleteQuiet time.Duration
	unrouted    func(id string)
	checkSpec   func(*modelpkg.Spec) error
	onChange    func(Change)
	outcomes    OutcomeSource

	born    time.Time              // when the controller was made: traffic before it is unknown
	tmu     sync.Mutex             // guards traffic
	traffic map[string]trafficSeen // per model: request count when it last changed

	mu       sync.Mutex // guards versions, policies, dirty, closing, started, invalid, emptyFolder
	versions map[string]*Loaded
	policies map[string]registry.Policy // current policy per model
	dirty    map[string]*Loaded         // state not yet persisted (store outage)
	closing  bool
	started  bool
	// invalid and emptyFolder are the latest models folder scan's problems.
	invalid     map[string]PackageProblem // by folder as displayed
	emptyFolder string

	scanMu sync.Mutex // serializes scans of the models folder

	rmu      sync.Mutex // guards rollouts and driving; serializes every policy change
	rollouts map[string]*Rollout
	driving  map[string]bool // models whose rollout driver runs (see startDriverLocked)
	// rolloutView holds a copy of each rollout for readers (model → *Rollout).
	rolloutView sync.Map
	wake        chan struct{} // closed and replaced when a version's state changes

	refreshKick chan struct{} // Follow's 1-slot wake-up (nil without Follow); guarded by mu
}

// Loaded is the in-memory state of one version.
type Loaded struct {
	Version registry.Version // as published; State/Reason/Timings below are live
	Spec    *modelpkg.Spec
	done    chan struct{} // closed when the load ends (ready or failed)
	startup bool          // published before or at Start: readiness waits for it

	// guarded by Controller.mu
	State   registry.State
	Reason  string
	Timings registry.Timings
	Server  Hosted
	Drift   *drift.Monitor // nil without drift: in model.yaml
}

// New returns a controller built from cfg. It starts nothing: Start,
// Follow and Watch do.
func New(cfg Config) *Controller {
	ctx, cancel := context.WithCancel(context.Background())
	store, host, log := cfg.Store, cfg.Host, cfg.Logger
	if host == nil {
		host = &LocalHost{Artifact: func(ctx context.Context, sha string) ([]byte, error) { return registry.ReadArtifact(ctx, store, sha) }}
	}
	if log == nil {
		log = slog.Default()
	}
	return &Controller{store: store, host: host, log: log, Table: &routing.Holder{}, ctx: ctx, cancel: cancel,
		sem: make(chan struct{}, 2), versions: map[string]*Loaded{}, Stats: &vstats.Set{},
		metrics: cfg.Metrics, noDrift: cfg.NoDrift, deleteQuiet: cfg.DeleteQuiet, unrouted: cfg.Unrouted, checkSpec: cfg.CheckSpec, onChange: cfg.Changed, outcomes: cfg.Outcomes,
		policies: map[string]registry.Policy{}, dirty: map[string]*Loaded{},
		rollouts: map[string]*Rollout{}, wake: make(chan struct{}),
		invalid: map[string]PackageProblem{}, born: time.Now().UTC(), traffic: map[string]trafficSeen{}}
}

// goUnlessClosing runs f on a goroutine the controller owns (Close waits
// for it), unless Close has begun: then it returns false and runs nothing.
// The check and wg.Add are under mu, so no Add can follow Close's Wait.
func (c *Controller) goUnlessClosing(f func()) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.goLocked(f)
}

// goLocked is goUnlessClosing with mu held.
func (c *Controller) goLocked(f func()) bool {
	if c.closing {
		return false
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
	return true
}

func key(model string, n int) string { return fmt.Sprintf("%s@%d", model, n) }

// Start restores the deployments and rollouts from the store and starts
// loading every published version, except those that failed or were
// archived: they stay so until published again or loaded by hand (Load). Versions published before MarkStarted
// are "startup" versions: readiness waits for them.
func (c *Controller) Start(ctx context.Context) error {
	ps, err := c.store.Current(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	for _, p := range ps {
		c.policies[p.Model] = p
	}
	c.mu.Unlock()
	if err := c.restoreRollouts(ctx); err != nil {
		return err
	}
	vs, err := c.store.List(ctx)
	if err != nil {
		return err
	}
	for _, v := range vs {
		c.startLoad(v, false) // a failed or archived version stays so until asked
	}
	c.goUnlessClosing(c.catchUp)
	return nil
}

// MarkStarted ends startup: readiness now waits only for startup versions.
func (c *Controller) MarkStarted() {
	c.mu.Lock()
	c.started = true
	c.mu.Unlock()
}

// Publish runs the checks of `sluice check` on an uploaded package
// (CheckPackage, and Config.CheckSpec) and refuses it, storing nothing, if
// one fails; else it stores the package as a new version (or finds the identical one),
// writes an audit event naming actor (the tenant that pushed it, or
// SystemActor for the models folder), and starts loading the version if it
// is not loaded. Publishing a failed, archived or deleted version again
// loads it again (its artifact may have been repaired by the upload). When
// the event cannot be written the version stays published and the error
// says so: publishing again (it is idempotent) writes the event.
func (c *Controller) Publish(ctx context.Context, p *modelpkg.Package, actor string) (registry.Version, bool, error) {
	if err := c.checkUpload(ctx, p); err != nil {
		return registry.Version{}, false, err
	}
	v, created, err := c.publish(ctx, p, true)
	if err != nil {
		return v, false, err
	}
	what := fmt.Sprintf("published %s (artifact sha256:%s)", v.ID(), short(v.ArtifactSHA))
	if !created {
		what = fmt.Sprintf("published %s again: identical to the stored version (artifact sha256:%s)", v.ID(), short(v.ArtifactSHA))
	}
	if err := c.audit(ctx, registry.Event{Model: v.Model, At: time.Now().UTC(), Actor: actor, Action: "publish", What: what}); err != nil {
		c.log.Error("publish: audit event not written", "model", v.Model, "version", v.N, "actor", actor, "err", err)
		return v, created, errs.Wrap(errs.Unavailable, err, "%s is published but its audit event could not be written; publish it again to record it", v.ID())
	}
	return v, created, nil
}

// checkUpload runs CheckPackage on p (one at a time with the loads: it
// holds a loaded model) and refuses the upload as invalid_package, naming
// what failed.
func (c *Controller) checkUpload(ctx context.Context, p *modelpkg.Package) error {
	if c.checkSpec != nil {
		if err := c.checkSpec(p.Spec); err != nil {
			return errs.New(errs.InvalidPackage, "%s: %v; nothing was published", p.Spec.Manifest.Name, err)
		}
	}
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-ctx.Done():
		return ctx.Err()
	case <-c.ctx.Done():
		return errs.New(errs.Unavailable, "server shutting down")
	}
	pc, err := CheckPackage(ctx, p, CheckOptions{})
	pc.Close()
	if err != nil {
		return errs.New(errs.InvalidPackage, "%v; nothing was published (`sluice check DIR` runs the same checks)", err)
	}
	return nil
}

// short is the first 12 hex digits of a hash.
func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// publish stores p; again says whether an identical version that failed or
// was archived is loaded again (an upload) or left as it is (a folder scan).
func (c *Controller) publish(ctx context.Context, p *modelpkg.Package, again bool) (registry.Version, bool, error) {
	v, created, err := c.store.Publish(ctx, p)
	if err != nil {
		return v, false, err
	}
	c.startLoad(v, again || created)
	return v, created, nil
}

// dormant reports whether a version in state st is not loaded until asked:
// it failed, or was archived (deleted models' versions too).
func dormant(st registry.State) bool {
	return st == registry.Failed || st == registry.Archived || st == registry.Deleted
}

// startLoad loads v unless it is loaded or loading. A version that failed
// or was archived is loaded again only when again is true (an upload or an
// explicit load); otherwise it is only listed, with its recorded state.
func (c *Controller) startLoad(v registry.Version, again bool) *Loaded {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.versions[v.ID()]; ok {
		select {
		case <-l.done:
			if !dormant(l.State) || !again {
				return l
			}
		default:
			return l
		}
	} else if dormant(v.State) && !again {
		l := &Loaded{Version: v, State: v.State, Reason: v.Reason, Timings: v.Timings, done: make(chan struct{})}
		close(l.done)
		c.versions[v.ID()] = l
		c.publishLocked()
		return l
	}
	l := &Loaded{Version: v, State: registry.Loading, done: make(chan struct{}), startup: !c.started}
	c.versions[v.ID()] = l
	if c.closing {
		l.State, l.Reason = registry.Failed, "server shutting down"
		close(l.done)
		return l
	}
	c.publishLocked()
	c.goLocked(func() { c.load(l) }) // not closing: checked above
	return l
}

// Wait blocks until model@n finished loading or ctx ends.
func (c *Controller) Wait(ctx context.Context, model string, n int) {
	c.mu.Lock()
	l := c.versions[key(model, n)]
	c.mu.Unlock()
	if l == nil {
		return
	}
	select {
	case <-l.done:
	case <-ctx.Done():
	}
}

func (c *Controller) setState(l *Loaded, st registry.State, reason string) {
	if c.metrics != nil {
		c.metrics.SetVersionState(l.Version.Model, strconv.Itoa(l.Version.N), string(st))
	}
	c.mu.Lock()
	l.State, l.Reason = st, reason
	t := l.Timings
	close(c.wake)
	c.wake = make(chan struct{})
	c.mu.Unlock()
	c.changed(Change{Kind: "version", Model: l.Version.Model, Version: l.Version.N, State: st, Reason: reason})
	if err := c.store.SetState(c.ctx, l.Version.Model, l.Version.N, st, reason, t); err != nil {
		c.log.Warn("record version state; will retry", "model", l.Version.Model, "version", l.Version.N, "err", err)
		c.mu.Lock()
		c.dirty[l.Version.ID()] = l
		c.mu.Unlock()
	}
}

// catchUp retries state writes that failed while the store was down.
func (c *Controller) catchUp() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		c.mu.Lock()
		var todo []*Loaded
		for _, l := range c.dirty {
			todo = append(todo, l)
		}
		c.mu.Unlock()
		for _, l := range todo {
			c.mu.Lock()
			st, reason, tm := l.State, l.Reason, l.Timings
			c.mu.Unlock()
			if err := c.store.SetState(c.ctx, l.Version.Model, l.Version.N, st, reason, tm); err == nil {
				c.mu.Lock()
				delete(c.dirty, l.Version.ID())
				c.mu.Unlock()
				c.log.Info("store back: version state recorded", "model", l.Version.Model, "version", l.Version.N)
			}
		}
		c.retryPolicies()
		c.exportDrift()
		c.seenTraffic(time.Now().UTC())
	}
}

func (c *Controller) load(l *Loaded) {
	defer close(l.done)
	select {
	case c.sem <- struct{}{}:
		defer func() { <-c.sem }()
	case <-c.ctx.Done():
		return
	}
	v := l.Version
	log := c.log.With("model", v.Model, "version", v.N)
	fail := func(err error) {
		if c.ctx.Err() != nil {
			// Stopped by shutdown, not by the version: the store keeps its
			// earlier state, so the next start loads it again.
			c.mu.Lock()
			l.State, l.Reason = registry.Failed, "server shutting down"
			c.mu.Unlock()
			return
		}
		if e := (*errs.Error)(nil); errors.As(err, &e) && e.Err != nil && !strings.Contains(err.Error(), e.Err.Error()) {
			// The reason leaves out what the client must not see (server
			// paths); the log has it.
			log.Error("version failed", "reason", err.Error(), "cause", e.Err.Error())
		} else {
			log.Error("version failed", "reason", err.Error())
		}
		if c.metrics != nil {
			c.mu.Lock()
			t := l.Timings
			c.mu.Unlock()
			c.metrics.LoadFinished(v.Model, strconv.Itoa(v.N), telemetry.LoadTimings{Load: t.Load, Golden: t.Golden, Warmup: t.Warmup}, false, v.ArtifactBytes)
		}
		c.setState(l, registry.Failed, err.Error())
		c.mu.Lock()
		c.publishLocked()
		c.mu.Unlock()
	}
	c.setState(l, registry.Loading, "")
	spec, err := modelpkg.Parse(v.ID()+"/model.yaml", v.Manifest)
	if err != nil {
		fail(fmt.Errorf("load %s: %w", v.ID(), err))
		return
	}
	if c.checkSpec != nil {
		if err := c.checkSpec(spec); err != nil {
			fail(fmt.Errorf("load %s: %w", v.ID(), err))
			return
		}
	}
	c.mu.Lock()
	l.Spec = spec
	c.mu.Unlock()
	sv := spec.Manifest.Serving
	var obs serving.Observer
	if c.metrics != nil {
		ver := strconv.Itoa(v.N)
		c.metrics.InitVersion(v.Model, ver)
		fields := make([]string, 0, len(spec.Manifest.Input.Fields))
		for _, f := range spec.Manifest.Input.Fields {
			fields = append(fields, f.Name)
		}
		c.metrics.DeclareFields(v.Model, ver, fields)
		obs = &observer{m: c.metrics, model: v.Model, version: ver, maxBatch: sv.MaxBatchSize}
	}
	hosted, tm, err := c.host.Start(c.ctx, HostRequest{Version: v, Spec: spec, Observer: obs, Logger: log})
	c.mu.Lock()
	l.Timings = registry.Timings{Load: tm.Load, Golden: tm.Golden, Warmup: tm.Warmup}
	c.mu.Unlock()
	if err != nil {
		fail(err)
		return
	}
	var mon *drift.Monitor
	if spec.Manifest.Drift != nil && !c.noDrift {
		if mon, err = c.buildDrift(c.ctx, v, spec, hosted); err != nil {
			_ = hosted.Close(context.Background())
			fail(err)
			return
		}
	}
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		_ = hosted.Close(context.Background())
		return
	}
	l.Server = hosted
	l.Drift = mon
	c.mu.Unlock()
	c.setState(l, registry.Ready, "")
	if c.metrics != nil {
		c.metrics.LoadFinished(v.Model, strconv.Itoa(v.N), telemetry.LoadTimings{Load: tm.Load, Golden: tm.Golden, Warmup: tm.Warmup}, true, v.ArtifactBytes)
	}
	c.mu.Lock()
	c.publishLocked()
	c.mu.Unlock()
	c.firstPolicy(v)
	log.Info("version ready", "load", tm.Load.String(), "golden", tm.Golden.String(), "warmup", tm.Warmup.String(), "replicas", sv.Replicas, "host", c.host.Name())
}

// Published is one package published by PublishFS.
type Published struct {
	Dir       string // the package folder as displayed
	Version   registry.Version
	Created   bool
	HadPolicy bool              // the model had a deployment before this publish
	Release   *modelpkg.Release // the package's release plan, if any
}

// PackageProblem is a package folder that could not be read: its version
// is not published, the other packages are.
type PackageProblem struct {
	Dir   string // the folder as displayed ("models/fraud")
	Model string // the model it declares, else the folder's name
	Err   string // the strict parser's message: file:line: key: message
}

// Scan is what one PublishFS found in the models folder.
type Scan struct {
	Published []Published
	Invalid   []PackageProblem
	Empty     bool // the folder holds no package at all
}

// PublishFS publishes the packages of root in fsys: root itself when it
// holds a model.yaml, else every folder under it that holds one. An invalid
// package does not stop the others: it is listed in Scan.Invalid and
// reported (models listing, readiness warnings) until a later scan finds
// it valid or gone. The error is for what stops every package: an
// unreadable folder or a store that refuses to publish.
func (c *Controller) PublishFS(ctx context.Context, fsys fs.FS, root, display string) (Scan, error) {
	c.scanMu.Lock()
	defer c.scanMu.Unlock()
	dirs, err := modelpkg.Packages(fsys, root)
	if err != nil {
		return Scan{}, fmt.Errorf("read models folder %s: %w", display, err)
	}
	return c.publishDirsLocked(ctx, fsys, root, display, dirs, dirs)
}

// shownDir names package folder d of root in messages.
func shownDir(root, display, d string) string {
	if d == root {
		return display
	}
	return path.Join(display, path.Base(d))
}

// publishDirsLocked publishes the packages in todo, a subset of all (every
// package folder of root now), and updates the problems reported for the
// models folder. scanMu held.
func (c *Controller) publishDirsLocked(ctx context.Context, fsys fs.FS, root, display string, all, todo []string) (Scan, error) {
	sc := Scan{Empty: len(all) == 0}
	defer func() { c.setScan(root, display, all, sc) }()
	for _, d := range todo {
		shown := shownDir(root, display, d)
		p, err := modelpkg.ReadFS(fsys, d, shown)
		if err != nil {
			name := path.Base(shown)
			if b, rerr := fs.ReadFile(fsys, path.Join(d, modelpkg.ManifestFile)); rerr == nil {
				if n := modelpkg.NameOf(b); n != "" {
					name = n
				}
			}
			c.log.Error("invalid model package: not published", "dir", shown, "model", name, "err", err.Error())
			sc.Invalid = append(sc.Invalid, PackageProblem{Dir: shown, Model: name, Err: err.Error()})
			continue
		}
		pol, had := c.Policy(p.Spec.Manifest.Name)
		had = had && len(pol.Targets) > 0 // a deleted model's deployment has none
		v, created, err := c.publishFolder(ctx, p, display)
		if err != nil {
			return sc, fmt.Errorf("publish %s: %w", shown, err)
		}
		c.log.Info("published", "model", v.Model, "version", v.N, "new", created, "sha256", v.ArtifactSHA[:12])
		sc.Published = append(sc.Published, Published{Dir: shown, Version: v, Created: created, HadPolicy: had, Release: p.Spec.Manifest.Release})
	}
	if sc.Empty {
		c.log.Warn("models folder holds no model package (a folder with model.yaml, or a folder of such folders)", "models", display)
	}
	return sc, nil
}

// setScan records the problems of a scan of the models folder: those of the
// packages it read replace theirs, those of folders that are gone are
// dropped, the others stay.
func (c *Controller) setScan(root, display string, all []string, sc Scan) {
	present := map[string]bool{}
	for _, d := range all {
		present[shownDir(root, display, d)] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for dir := range c.invalid {
		if !present[dir] {
			delete(c.invalid, dir)
		}
	}
	for _, p := range sc.Published {
		delete(c.invalid, p.Dir)
	}
	for _, p := range sc.Invalid {
		c.invalid[p.Dir] = p
	}
	c.emptyFolder = ""
	if sc.Empty {
		c.emptyFolder = display
	}
}

// InvalidPackages lists the packages of the models folder that the latest
// scans could not read, by folder.
func (c *Controller) InvalidPackages() []PackageProblem {
	c.mu.Lock()
	out := make([]PackageProblem, 0, len(c.invalid))
	for _, p := range c.invalid {
		out = append(out, p)
	}
	c.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Dir < out[j].Dir })
	return out
}

// publishFolder publishes a package of the models folder: an audit event
// (actor SystemActor) only when it makes a new version, so a restart that
// reads the same folder again adds none.
func (c *Controller) publishFolder(ctx context.Context, p *modelpkg.Package, display string) (registry.Version, bool, error) {
	v, created, err := c.publish(ctx, p, false)
	if err != nil {
		return v, false, err
	}
	if created {
		e := registry.Event{Model: v.Model, At: time.Now().UTC(), Actor: SystemActor, Action: "publish",
			What: fmt.Sprintf("published %s (artifact sha256:%s) from the models folder %s", v.ID(), short(v.ArtifactSHA), display)}
		if err := c.audit(ctx, e); err != nil {
			return v, created, fmt.Errorf("publish %s: write its audit event: %w", v.ID(), err)
		}
	}
	return v, created, nil
}

// publishLocked rebuilds and swaps in the routing snapshot from the
// current policies and the ready versions.
func (c *Controller) publishLocked() {
	t := &routing.Table{Models: map[string]*routing.Entry{}}
	newest := map[string]*routing.Target{}
	for _, l := range c.versions {
		v := l.Version
		if l.State == registry.Deleted {
			continue // its model was deleted: unknown to the data plane
		}
		e := t.Models[v.Model]
		if e == nil {
			e = &routing.Entry{Versions: map[int]*routing.Target{}, NotReady: map[int]string{}}
			t.Models[v.Model] = e
		}
		if l.State == registry.Ready && l.Server != nil {
			tg := &routing.Target{Model: v.Model, N: v.N, ID: v.ID(), Spec: l.Spec, Server: l.Server, Digest: v.Digest, Runtime: v.Runtime, Drift: l.Drift}
			e.Versions[v.N] = tg
			if newest[v.Model] == nil || v.N > newest[v.Model].N {
				newest[v.Model] = tg
			}
		} else {
			why := string(l.State)
			if l.Reason != "" {
				why += ": " + l.Reason
			}
			e.NotReady[v.N] = why
		}
	}
	for name, e := range t.Models {
		p, ok := c.policies[name]
		if !ok || len(p.Targets) == 0 {
			// No policy yet (its first write may be waiting for the store):
			// the ready version serves, as the first policy will say.
			if tg := newest[name]; tg != nil {
				e.Routes = []routing.Route{{Range: routing.Range{Version: tg.N, Lo: 0, Hi: routing.Buckets}, Target: tg}}
			}
			continue
		}
		e.Policy = p.Version
		var ws []routing.Weighted
		for _, tg := range p.Targets {
			if tg.Shadow {
				if s := e.Versions[tg.Version]; s != nil {
					e.Shadows = append(e.Shadows, s)
				}
				continue
			}
			ws = append(ws, routing.Weighted{Version: tg.Version, Weight: tg.Weight})
		}
		for _, r := range routing.Assign(ws) {
			e.Routes = append(e.Routes, routing.Route{Range: r, Target: e.Versions[r.Version]})
		}
		if c.metrics != nil {
			for _, tg := range p.Targets {
				c.metrics.SetCanaryShare(name, strconv.Itoa(tg.Version), float64(tg.Weight)/100)
			}
		}
	}
	c.Table.Store(t)
}

// Status is a snapshot of one version for the API.
type Status struct {
	Version registry.Version
	State   registry.State
	Reason  string
	Timings registry.Timings
	Spec    *modelpkg.Spec
	Stats   *serving.Stats
}

// Versions lists every known version (loaded or not), by model then number.
func (c *Controller) Versions() []Status {
	c.mu.Lock()
	out := make([]Status, 0, len(c.versions))
	servers := make([]Hosted, 0, len(c.versions))
	for _, l := range c.versions {
		out = append(out, Status{Version: l.Version, State: l.State, Reason: l.Reason, Timings: l.Timings, Spec: l.Spec})
		servers = append(servers, l.Server)
	}
	c.mu.Unlock()
	for i, s := range servers {
		if s != nil {
			st := s.Stats()
			out[i].Stats = &st
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Version.Model != out[j].Version.Model {
			return out[i].Version.Model < out[j].Version.Model
		}
		return out[i].Version.N < out[j].Version.N
	})
	return out
}

// Readiness reports whether the versions present at startup have finished
// loading (ready or failed). A version pushed later and still loading does
// not make a serving server unready. warnings lists the models that cannot
// serve all of their traffic — no ready version, or a version their
// deployment routes traffic to is not ready (a failed load: a missing or
// damaged artifact) — naming the versions and why: their calls answer 503
// but do not hold the other models back.
func (c *Controller) Readiness() (ready bool, problems, warnings []string) {
	c.mu.Lock()
	started, closing := c.started, c.closing
	var pending []string
	for _, l := range c.versions {
		if !l.startup {
			continue
		}
		if l.State != registry.Ready && l.State != registry.Failed {
			pending = append(pending, l.Version.ID()+" is "+string(l.State))
		} else if p := c.policies[l.Version.Model]; l.State == registry.Ready && len(p.Targets) == 0 {
			// Ready, but its model's first deployment is not written yet
			// (firstPolicy runs after the state is set): nothing routes
			// to it, so a client told "ready" would get not_ready.
			pending = append(pending, l.Version.ID()+" is ready, its model's first deployment not yet written")
		}
	}
	c.mu.Unlock()
	switch {
	case closing:
		return false, []string{"shutting down"}, nil
	case !started:
		return false, []string{"starting"}, nil
	}
	sort.Strings(pending)
	warnings = servingWarnings(c.Table.Load())
	for _, p := range c.InvalidPackages() {
		warnings = append(warnings, fmt.Sprintf("package %s (model %s) is invalid and was not published: %s", p.Dir, p.Model, strings.ReplaceAll(p.Err, "\n", "; ")))
	}
	c.mu.Lock()
	if c.emptyFolder != "" {
		warnings = append(warnings, "models folder "+c.emptyFolder+" holds no model package (a folder with model.yaml, or a folder of such folders)")
	}
	c.mu.Unlock()
	sort.Strings(warnings)
	return len(pending) == 0, pending, warnings
}

// Close marks the controller closing, stops loads and drains every
// version's server within ctx.
func (c *Controller) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closing = true
	var servers []Hosted
	for _, l := range c.versions {
		if l.Server != nil {
			servers = append(servers, l.Server)
		}
	}
	c.mu.Unlock()
	c.cancel()
	var errList []error
	var wg sync.WaitGroup
	var emu sync.Mutex
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Close(ctx); err != nil {
				emu.Lock()
				errList = append(errList, err)
				emu.Unlock()
			}
		}()
	}
	wg.Wait()
	c.wg.Wait()
	return errors.Join(errList...)
}

func (o *observer) Padding(ratio float64) { o.m.ObservePadding(o.model, o.version, ratio) }
