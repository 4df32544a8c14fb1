package app

import (
	"context"
	"errors"

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
