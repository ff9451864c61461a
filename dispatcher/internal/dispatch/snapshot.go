package dispatch

import (
	"context"
	"sync"

	"golang.org/x/sync/singleflight"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
)

// snapshots remembers which skill snapshots this process has stored, so that a skill
// version's snapshot is inserted once per process instead of with every run that references
// it. Concurrent first dispatches of a version share one insert; a failed insert is not
// remembered, so the next dispatch tries again. It grows by one digest per skill version the
// process dispatches. The zero value is ready to use.
type snapshots struct {
	mu     sync.RWMutex
	stored map[store.Digest]struct{}
	flight singleflight.Group
}

// ensure returns once snap is stored. The insert is shared by every dispatch waiting for it,
// so it runs under none of their deadlines; each waiter still stops at its own.
func (s *snapshots) ensure(ctx context.Context, db store.DB, snap store.Snapshot) error {
	s.mu.RLock()
	_, ok := s.stored[snap.Digest]
	s.mu.RUnlock()
	if ok {
		return nil
	}
	ch := s.flight.DoChan(string(snap.Digest[:]), func() (any, error) {
		if err := store.EnsureSnapshot(context.WithoutCancel(ctx), db, snap); err != nil {
			return nil, err
		}
		s.mu.Lock()
		if s.stored == nil {
			s.stored = map[store.Digest]struct{}{}
		}
		s.stored[snap.Digest] = struct{}{}
		s.mu.Unlock()
		return nil, nil
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// forget drops a snapshot that a run insert found missing, so the next dispatch stores it
// again instead of failing for as long as the process lives.
func (s *snapshots) forget(d store.Digest) {
	s.mu.Lock()
	delete(s.stored, d)
	s.mu.Unlock()
}
