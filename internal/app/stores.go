package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"

	"github.com/sluiceml/sluice/internal/pgdb"
	"github.com/sluiceml/sluice/internal/records"
	"github.com/sluiceml/sluice/internal/records/recordsdb"
	"github.com/sluiceml/sluice/internal/registry"
)

// registryStore is the registry serve runs on: SQLite or PostgreSQL.
type registryStore interface {
	registry.Store
	io.Closer
}

// recordStore is the records store serve runs on.
type recordStore interface {
	records.Store
	io.Closer
}

// storeName is --store for the log, its password redacted.
func storeName(storeURL string) string {
	if storeURL == "" {
		return "sqlite (in --data)"
	}
	return pgdb.Redact(storeURL)
}

// checkStore validates --store and its combination with --init-store.
func checkStore(storeURL string, initStore bool) error {
	switch {
	case storeURL == "":
		return nil
	case !pgdb.IsURL(storeURL):
		return fmt.Errorf("--store %q: want a PostgreSQL URL (postgres://USER@HOST:PORT/DB?sslmode=disable), or no --store for SQLite in --data", pgdb.Redact(storeURL))
	case initStore:
		return fmt.Errorf("--init-store re-initialises damaged SQLite files in --data; it does nothing for --store %s (restore a pg_dump backup instead, docs/operations.md)", pgdb.Redact(storeURL))
	}
	return nil
}

// openRegistry opens the registry: SQLite in data, or the PostgreSQL
// database of storeURL with artifacts in data/artifacts.
func openRegistry(ctx context.Context, storeURL, data string, initStore bool, art registry.Artifacts, log *slog.Logger) (registryStore, error) {
	if err := checkStore(storeURL, initStore); err != nil {
		return nil, err
	}
	if storeURL == "" {
		store, err := registry.OpenWith(data, registry.Options{InitStore: initStore, Artifacts: art})
		if err != nil {
			return nil, err
		}
		if a := store.MovedAside(); a != "" {
			log.Warn("--init-store: the damaged registry database was moved aside; starting with an empty registry", "moved_to", a)
		}
		if d, ok := store.Artifacts.(*registry.Dir); ok && d.Removed() > 0 {
			log.Info("deleted partial artifact writes left by an interrupted push", "files", d.Removed())
		}
		return store, nil
	}
	where := fmt.Sprint(art)
	if art == nil {
		d, err := registry.NewDir(filepath.Join(data, "artifacts"))
		if err != nil {
			return nil, err
		}
		if d.Removed() > 0 {
			log.Info("deleted partial artifact writes left by an interrupted push", "files", d.Removed())
		}
		art, where = d, filepath.Join(data, "artifacts")
	}
	store, err := registry.OpenPostgres(ctx, storeURL, art)
	if err != nil {
		return nil, err
	}
	store.Logger = log
	log.Info("registry on PostgreSQL", "store", pgdb.Redact(storeURL), "schema_version", registry.PostgresMigrations(), "artifacts", where)
	return store, nil
}

// openRecords opens the records store: SQLite in data, or the PostgreSQL
// database of storeURL.
func openRecords(ctx context.Context, storeURL, data string, initStore, durable bool, log *slog.Logger) (recordStore, error) {
	if storeURL == "" {
		rs, err := recordsdb.OpenWith(data, recordsdb.Options{InitStore: initStore, Durable: durable})
		if err != nil {
			return nil, err
		}
		if a := rs.MovedAside(); a != "" {
			log.Warn("--init-store: the damaged records database was moved aside; starting with no records", "moved_to", a)
		}
		return rs, nil
	}
	return recordsdb.OpenPostgres(ctx, storeURL, durable)
}
