package pgfeat

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/sluiceml/sluice/internal/features"
	"github.com/sluiceml/sluice/internal/features/featuretest"
	"github.com/sluiceml/sluice/internal/pgdb/pgtest"
)

func TestPostgresConformance(t *testing.T) {
	featuretest.Run(t, func(t *testing.T) featuretest.Store {
		url := pgtest.URL(t)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		s, err := Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		made := map[string]bool{}
		return featuretest.Store{
			Source: s,
			Put: func(ctx context.Context, v *features.View, entity string, values []*float64, at time.Time) error {
				if !made[v.Name] {
					typ := "text"
					if v.EntityInt {
						typ = "bigint"
					}
					cols := []string{pgx.Identifier{v.Entity}.Sanitize() + " " + typ + " PRIMARY KEY"}
					for _, f := range v.Fields {
						cols = append(cols, pgx.Identifier{f}.Sanitize()+" double precision")
					}
					cols = append(cols, "updated_at timestamptz")
					if _, err := s.pool.Exec(ctx, fmt.Sprintf("CREATE TABLE %s (%s)", pgx.Identifier{v.Name}.Sanitize(), strings.Join(cols, ", "))); err != nil {
						return err
					}
					made[v.Name] = true
				}
				names := []string{pgx.Identifier{v.Entity}.Sanitize()}
				args := []any{entity}
				if v.EntityInt {
					var n int64
					fmt.Sscan(entity, &n)
					args[0] = n
				}
				for k, f := range v.Fields {
					names = append(names, pgx.Identifier{f}.Sanitize())
					args = append(args, values[k])
				}
				names = append(names, "updated_at")
				if at.IsZero() {
					args = append(args, nil)
				} else {
					args = append(args, at)
				}
				ph := make([]string, len(args))
				for i := range ph {
					ph[i] = fmt.Sprintf("$%d", i+1)
				}
				_, err := s.pool.Exec(ctx, fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", pgx.Identifier{v.Name}.Sanitize(), strings.Join(names, ", "), strings.Join(ph, ", ")), args...)
				return err
			},
			Stall: func(t *testing.T) func() {
				// Reads do not wait for row locks in PostgreSQL: another
				// transaction's ACCESS EXCLUSIVE lock on the table stalls them.
				ctx := t.Context()
				if _, err := s.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS card_stats (card_id text PRIMARY KEY, declines5m float8, avg_amount float8)`); err != nil {
					t.Fatal(err)
				}
				tx, err := s.pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := tx.Exec(ctx, `LOCK TABLE card_stats IN ACCESS EXCLUSIVE MODE`); err != nil {
					t.Fatal(err)
				}
				return func() { tx.Rollback(context.Background()) }
			},
		}
	})
}

func TestBadURL(t *testing.T) {
	if _, err := Open(t.Context(), "postgres://x:y@%zz"); err == nil || !strings.Contains(err.Error(), "--features-postgres") || strings.Contains(err.Error(), ":y@") {
		t.Errorf("err %v", err)
	}
}
