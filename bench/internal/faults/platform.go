package faults

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/switchyard-ai/switchyard/harness"
)

// Platform is the suite's platform: every service of `make run` through the process
// harness, on a Postgres and a Redis of its own that a fault may crash.
type Platform struct {
	*harness.Harness
	// Stores are the platform's Postgres and Redis (scripts/stack.sh, profile faults).
	Stores *harness.Stores
}

// PlatformOptions configure StartPlatform.
type PlatformOptions struct {
	// Dir holds everything: stores/ (the data), logs/<service>.log, keys and certificates.
	// Its stores and logs are emptied first.
	Dir string
	// Bin is the directory of the binaries (harness.Build).
	Bin string
	// PGPort and RedisPort move the stores; 0 keeps the faults profile's 25434 and 26381.
	PGPort, RedisPort int
	// Log receives one line per step; nil discards.
	Log io.Writer
}

// StartPlatform starts the stores, migrates, bootstraps the development organisation and
// starts every service with SimArgs and ToolArgs, each once the one before is ready. On
// error it stops whatever it started.
func StartPlatform(ctx context.Context, o PlatformOptions) (_ *Platform, err error) {
	if err := os.RemoveAll(filepath.Join(o.Dir, "logs")); err != nil {
		return nil, err
	}
	p := &Platform{}
	defer func() {
		if err != nil {
			p.Close()
		}
	}()
	if p.Stores, err = harness.StartStores(ctx, filepath.Join(o.Dir, "stores"), o.PGPort, o.RedisPort); err != nil {
		return nil, err
	}
	if p.Harness, err = harness.New(ctx, harness.Options{Dir: o.Dir, Bin: o.Bin, DatabaseURL: p.Stores.DBURL,
		RedisURL: p.Stores.RedisURL, RouterTLS: true, Bootstrap: true, SimArgs: SimArgs, ToolArgs: ToolArgs,
		StopGrace: 35 * time.Second, Log: o.Log}); err != nil {
		return nil, err
	}
	return p, p.StartAll(ctx, harness.Platform...)
}

// Restart starts a service again on its address and waits until it is ready.
func (p *Platform) Restart(ctx context.Context, name string) error {
	_, err := p.Start(ctx, name)
	return err
}

// Close stops the services (SIGTERM, in reverse start order), then the stores.
func (p *Platform) Close() {
	if p.Harness != nil {
		p.Harness.Close()
	}
	if p.Stores != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = p.Stores.Stop(ctx)
	}
}
