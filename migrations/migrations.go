// Package migrations holds Switchyard's versioned PostgreSQL schema and applies it.
//
// The SQL files in sql/ are embedded in every binary; each binary's `migrate` step and the
// test harness call Apply. Migrations run under a Postgres advisory lock, so any number of
// processes may start at once against one database.
package migrations

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed sql/*.sql
var files embed.FS

// Apply brings the database behind pool up to the newest schema version and returns that
// version. It is safe to call concurrently from several processes.
func Apply(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	provider, db, err := newProvider(pool)
	if err != nil {
		return 0, err
	}
	defer db.Close()
	if _, err := provider.Up(ctx); err != nil {
		return 0, fmt.Errorf("applying migrations: %w", err)
	}
	version, err := provider.GetDBVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading schema version: %w", err)
	}
	return version, nil
}

// Latest is the newest schema version the embedded migrations define.
func Latest() (int64, error) {
	sub, err := fs.Sub(files, "sql")
	if err != nil {
		return 0, err
	}
	entries, err := fs.ReadDir(sub, ".")
	if err != nil {
		return 0, err
	}
	var latest int64
	for _, e := range entries {
		v, err := goose.NumericComponent(e.Name())
		if err != nil {
			return 0, fmt.Errorf("migration %q: %w", e.Name(), err)
		}
		latest = max(latest, v)
	}
	return latest, nil
}

func newProvider(pool *pgxpool.Pool) (*goose.Provider, *sql.DB, error) {
	sub, err := fs.Sub(files, "sql")
	if err != nil {
		return nil, nil, err
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, nil, fmt.Errorf("creating migration lock: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	// Out of order: migrations are written on branches that land in any order, each touching
	// its own tables and columns, so a database that already ran a later one (it ran main
	// between two landings) still gets an earlier one that landed after it.
	provider, err := goose.NewProvider(goose.DialectPostgres, db, sub, goose.WithSessionLocker(locker),
		goose.WithAllowOutofOrder(true))
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("loading migrations: %w", err)
	}
	return provider, db, nil
}

// Fingerprint identifies the embedded migrations' content, so a test harness can tell a
// template database built from other SQL.
func Fingerprint() string {
	h := sha256.New()
	_ = fs.WalkDir(files, "sql", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(path)
		if err != nil {
			return err
		}
		h.Write([]byte(path))
		h.Write(b)
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}
