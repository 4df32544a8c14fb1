package app

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sluiceml/sluice/internal/features"
	"github.com/sluiceml/sluice/internal/features/pgfeat"
	"github.com/sluiceml/sluice/internal/features/redisfeat"
	"github.com/sluiceml/sluice/internal/gateway"
	"github.com/sluiceml/sluice/internal/modelpkg"
)

// featureStores is the "feature stores" part: the Redis and PostgreSQL
// feature stores of --features-redis and --features-postgres, the
// features.Set over them (memory tier, breakers, read-through) and its
// Run (probes and fills) on the group's goroutine.
type featureStores struct {
	redis  *redisfeat.Source
	pg     *pgfeat.Source
	set    *features.Set
	ctx    context.Context
	cancel context.CancelFunc
}

func (a *app) startFeatures(ctx context.Context) error {
	fs := &featureStores{}
	var stores []features.Store
	if u := a.cfg.FeaturesRedis; u != "" {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		s, err := redisfeat.Open(cctx, u)
		cancel()
		if err != nil {
			return err
		}
		fs.redis = s
		stores = append(stores, features.Store{Tier: features.Redis, Source: s})
		if err := s.Ping(ctx); err != nil {
			a.log.Warn("feature store not reachable yet: its fields get their defaults until it answers (probed every 250ms)", "store", "redis", "url", s.URL(), "err", err.Error())
		}
	}
	if u := a.cfg.FeaturesPostgres; u != "" {
		s, err := pgfeat.Open(ctx, u)
		if err != nil {
			fs.close()
			return err
		}
		fs.pg = s
		stores = append(stores, features.Store{Tier: features.Database, Source: s})
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		if err := s.Ping(pctx); err != nil {
			a.log.Warn("feature store not reachable yet: its fields get their defaults until it answers (probed every 250ms)", "store", "database", "url", s.URL(), "err", err.Error())
		}
		cancel()
	}
	fs.set = features.NewSet(features.Config{Stores: stores, Metrics: a.metrics})
	fs.ctx, fs.cancel = context.WithCancel(context.Background())
	a.feat = fs
	return nil
}

func (a *app) runFeatures() error { return a.feat.set.Run(a.feat.ctx) }

func (a *app) stopFeatures(context.Context) error {
	a.feat.cancel()
	a.feat.close()
	return nil
}

func (fs *featureStores) close() {
	if fs.redis != nil {
		fs.redis.Close()
	}
	if fs.pg != nil {
		fs.pg.Close()
	}
}

// featureSet is the gateway's view of the feature stores (nil: none).
func (a *app) featureSet() gateway.FeatureSet {
	if a.feat == nil {
		return nil
	}
	return &gateway.Features{Set: a.feat.set}
}

// errNoFeatureStore is why a version with features: is refused on a
// server without --features-redis or --features-postgres.
var errNoFeatureStore = errors.New("no feature store")

// checkSpec refuses a version this server cannot serve: one that fills
// features with no feature store configured.
func (a *app) checkSpec(spec *modelpkg.Spec) error {
	f := spec.Manifest.Features
	if f == nil || a.feat != nil {
		return nil
	}
	return fmt.Errorf("features: the model fills %s from view %s but this server has no feature store: start sluice serve with --features-redis redis://HOST:PORT/DB or --features-postgres postgres://… (%w)",
		strings.Join(f.FieldNames(), ", "), f.View, errNoFeatureStore)
}
