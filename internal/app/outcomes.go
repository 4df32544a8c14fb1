package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluiceml/sluice/internal/abstat"
	"github.com/sluiceml/sluice/internal/control"
	"github.com/sluiceml/sluice/internal/outcomes"
	"github.com/sluiceml/sluice/internal/outcomes/outcomesdb"
)

// outcomeStore is what app holds of the outcomes' database.
type outcomeStore interface {
	outcomes.Store
	Close() error
}

// openOutcomes opens the outcomes' store beside the records': outcomes.db
// in --data, or --store's PostgreSQL.
func (a *app) openOutcomes(ctx context.Context) error {
	var err error
	if a.cfg.StoreURL == "" {
		a.os, err = outcomesdb.Open(a.cfg.Data)
	} else {
		a.os, err = outcomesdb.OpenPostgres(context.WithoutCancel(ctx), a.cfg.StoreURL)
	}
	return err
}

func (a *app) closeOutcomes(context.Context) error {
	if a.os == nil {
		return nil
	}
	return a.os.Close()
}

// newJoiner builds the joins' writer; its Run writes until stopped, then
// flushes.
func (a *app) newJoiner(context.Context) error {
	a.joiner = outcomes.NewJoiner(a.os, outcomes.JoinerConfig{Retention: a.cfg.Retention, Logger: a.log})
	a.joinerCtx, a.stopJoiner = context.WithCancel(context.Background())
	return nil
}

func (a *app) runJoiner() error {
	err := a.joiner.Run(a.joinerCtx)
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// experimentStore is the outcomes' store's experiments (both stores of
// outcomesdb are one).
type experimentStore interface {
	outcomes.ExperimentStore
}

// newLab builds the experiments' runner over the outcome store; its Run
// refreshes every running experiment every --experiments-every.
func (a *app) newLab(context.Context) error {
	every := a.cfg.ExperimentsEvery
	if every == 0 {
		every = 15 * time.Second
	}
	if every < time.Second || every > time.Minute {
		return fmt.Errorf("--experiments-every must be 1s to 1m (figures refreshed at least every minute), got %s", every)
	}
	es, ok := a.os.(experimentStore)
	if !ok {
		return errors.New("the outcome store keeps no experiments")
	}
	a.lab = &outcomes.Lab{Store: a.os, Exps: es, Every: every, Metrics: a.metrics, Log: a.log}
	a.labCtx, a.stopLab = context.WithCancel(context.Background())
	return nil
}

func (a *app) runLab() error { return a.lab.Run(a.labCtx) }

// outcomeSource is the controller's view of the outcomes for rollout
// gates on a metric (nil without an outcome store).
func (a *app) outcomeSource() control.OutcomeSource {
	if a.lab == nil {
		return nil
	}
	lab := a.lab
	return func(ctx context.Context, model, metric, direction string, baseline, candidate int, since time.Time, prevP float64) (abstat.Result, error) {
		return lab.Compare(ctx, model, metric, direction, baseline, candidate, since, prevP)
	}
}
