// Package registry is the dispatcher's in-process cache of the registry — skills, queues,
// organisations and API keys — kept true by Postgres LISTEN/NOTIFY (the process's
// postgres.Notifier): every change to those tables notifies channel registry_changed and
// drops the cached entry, so no dispatcher serves a changed row longer than the notification
// takes. While the notifier is not connected the cache is bypassed (every read goes to
// Postgres) and it is emptied on reconnect, since notifications may have been missed.
package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/switchyard-ai/switchyard/dispatcher/internal/auth"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/store"
	"github.com/switchyard-ai/switchyard/shared/postgres"
	"github.com/switchyard-ai/switchyard/shared/skill"
)

// Channel is the Postgres notification channel of registry changes.
const Channel = "registry_changed"

type skillKey struct{ org, jobType string }

type keyEntry struct {
	hash      []byte
	principal auth.Principal
}

// Cache serves registry reads.
type Cache struct {
	db  *pgxpool.Pool
	log *slog.Logger

	mu     sync.RWMutex
	live   bool
	gen    uint64
	skills map[skillKey]skillEntry
	orgs   map[string]store.Org
	queues map[string]store.Queue
	// queueList holds every registered queue under allQueues, for runs-on classes.
	queueList map[string][]store.Queue
	keys      map[string]keyEntry

	// notified is closed and replaced on every invalidation; tests wait on it.
	notified    chan struct{}
	unsubscribe func()
}

type skillEntry struct {
	s     skill.Skill
	snap  store.Snapshot
	found bool
}

// New returns a cache; call Follow to follow changes (without it, nothing is cached).
func New(db *pgxpool.Pool, log *slog.Logger) *Cache {
	c := &Cache{db: db, log: log, notified: make(chan struct{})}
	c.reset()
	return c
}

func (c *Cache) reset() {
	c.skills = map[skillKey]skillEntry{}
	c.orgs = map[string]store.Org{}
	c.queues = map[string]store.Queue{}
	c.queueList = map[string][]store.Queue{}
	c.keys = map[string]keyEntry{}
	c.gen++
}

// Follow subscribes the cache to registry changes on n: it caches from the notifier's
// (re)connection on, and is bypassed while the notifier is down. Call it before n.Start.
func (c *Cache) Follow(n *postgres.Notifier) {
	c.unsubscribe = n.Subscribe(Channel, postgres.Handler{
		Notify: func(_ context.Context, payload string) { c.invalidate(payload) },
		Resync: func(context.Context) { c.setLive(true) },
		Lost: func() {
			c.log.Warn("registry notifications lost; cache bypassed until they are back")
			c.setLive(false)
		},
	})
}

// Stop ends following changes: the cache is bypassed from now on.
func (c *Cache) Stop() {
	if c.unsubscribe != nil {
		c.unsubscribe()
		c.setLive(false)
	}
}

// Live reports whether the cache is following changes (and so caching).
func (c *Cache) Live() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.live
}

// Changed returns a channel closed at the next invalidation.
func (c *Cache) Changed() <-chan struct{} {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.notified
}

func (c *Cache) setLive(live bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.live = live
	c.reset()
	close(c.notified)
	c.notified = make(chan struct{})
}

type change struct {
	Table   string `json:"table"`
	OrgID   string `json:"org_id,omitempty"`
	JobType string `json:"job_type,omitempty"`
	Name    string `json:"name,omitempty"`
}

func (c *Cache) invalidate(payload string) {
	var ch change
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gen++
	if err := json.Unmarshal([]byte(payload), &ch); err != nil {
		c.reset()
	} else {
		switch ch.Table {
		case "skills":
			delete(c.skills, skillKey{ch.OrgID, ch.JobType})
		case "queues":
			delete(c.queues, ch.Name)
			delete(c.queueList, allQueues)
		case "orgs":
			delete(c.orgs, ch.OrgID)
		case "api_keys":
			c.keys = map[string]keyEntry{}
		default:
			c.reset()
		}
	}
	close(c.notified)
	c.notified = make(chan struct{})
}

// ForgetSkill drops a binding this process just changed, so its next dispatch does not
// wait for the notification (other processes still do).
func (c *Cache) ForgetSkill(orgID, jobType string) {
	c.forget(change{Table: "skills", OrgID: orgID, JobType: jobType})
}

// ForgetOrg drops an organisation this process just changed.
func (c *Cache) ForgetOrg(orgID string) { c.forget(change{Table: "orgs", OrgID: orgID}) }

// ForgetKeys drops every cached API key (after a revocation).
func (c *Cache) ForgetKeys() { c.forget(change{Table: "api_keys"}) }

// ForgetQueue drops a queue this process just changed.
func (c *Cache) ForgetQueue(name string) { c.forget(change{Table: "queues", Name: name}) }

func (c *Cache) forget(ch change) {
	b, _ := json.Marshal(ch)
	c.invalidate(string(b))
}

// snapshot returns whether caching is on and the generation a read starts at.
func (c *Cache) snapshot() (bool, uint64) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.live, c.gen
}

// store saves a value read at generation gen, unless an invalidation happened since.
func (c *Cache) store(gen uint64, put func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.live && c.gen == gen {
		put()
	}
}

// readThrough serves key from the map that table returns while the cache is live; otherwise
// it loads the value and keeps it, unless an invalidation happened during the load. table is
// called under the cache's lock each time, since an invalidation replaces the maps.
func readThrough[K comparable, V any](c *Cache, table func() map[K]V, key K, load func() (V, error)) (V, error) {
	live, gen := c.snapshot()
	if live {
		c.mu.RLock()
		v, ok := table()[key]
		c.mu.RUnlock()
		if ok {
			return v, nil
		}
	}
	v, err := load()
	if err != nil {
		return v, err
	}
	c.store(gen, func() { table()[key] = v })
	return v, nil
}

// Skill returns an organisation's binding for a job type (skill.ErrNotFound if none) and
// the snapshot its runs reference. The snapshot is encoded and digested when the binding is
// read from Postgres, so a cached binding costs a dispatch neither. A missing binding is
// cached too, so unknown job types do not reach Postgres every time.
func (c *Cache) Skill(ctx context.Context, orgID, jobType string) (skill.Skill, store.Snapshot, error) {
	e, err := readThrough(c, func() map[skillKey]skillEntry { return c.skills }, skillKey{orgID, jobType},
		func() (skillEntry, error) {
			s, err := skill.Get(ctx, c.db, orgID, jobType)
			if errors.Is(err, skill.ErrNotFound) {
				return skillEntry{}, nil
			}
			if err != nil {
				return skillEntry{}, err
			}
			snap, err := store.NewSnapshot(orgID, s)
			if err != nil {
				return skillEntry{}, fmt.Errorf("snapshot of skill %q: %w", jobType, err)
			}
			return skillEntry{s: s, snap: snap, found: true}, nil
		})
	if err == nil && !e.found {
		err = skill.ErrNotFound
	}
	return e.s, e.snap, err
}

// Queue returns a registered queue (store.ErrNotFound if none).
func (c *Cache) Queue(ctx context.Context, name string) (store.Queue, error) {
	return readThrough(c, func() map[string]store.Queue { return c.queues }, name,
		func() (store.Queue, error) { return store.GetQueue(ctx, c.db, name) })
}

// allQueues is queueList's one key.
const allQueues = "all"

// Queues returns every registered queue, by name.
func (c *Cache) Queues(ctx context.Context) ([]store.Queue, error) {
	return readThrough(c, func() map[string][]store.Queue { return c.queueList }, allQueues,
		func() ([]store.Queue, error) { return store.ListQueues(ctx, c.db) })
}

// QueueLabels are the labels work may be sent to: every queue's name and the queue
// classes (store.Labels).
func (c *Cache) QueueLabels(ctx context.Context) ([]string, error) {
	qs, err := c.Queues(ctx)
	if err != nil {
		return nil, err
	}
	return store.Labels(qs), nil
}

// Org returns an organisation's settings.
func (c *Cache) Org(ctx context.Context, id string) (store.Org, error) {
	return readThrough(c, func() map[string]store.Org { return c.orgs }, id,
		func() (store.Org, error) { return store.GetOrg(ctx, c.db, id) })
}

// Authenticate resolves an API key to its principal; the stored hash is compared in
// constant time on every call, cached or not.
func (c *Cache) Authenticate(ctx context.Context, key string) (auth.Principal, error) {
	prefix, err := auth.Parse(key)
	if err != nil {
		return auth.Principal{}, auth.ErrUnknownKey
	}
	live, gen := c.snapshot()
	if live {
		c.mu.RLock()
		e, ok := c.keys[prefix]
		c.mu.RUnlock()
		if ok {
			if !auth.Matches(key, e.hash) {
				return auth.Principal{}, auth.ErrUnknownKey
			}
			return e.principal, nil
		}
	}
	p, hash, err := auth.Lookup(ctx, c.db, prefix)
	if errors.Is(err, auth.ErrUnknownKey) {
		auth.Matches(key, make([]byte, 32))
		return auth.Principal{}, err
	}
	if err != nil {
		return auth.Principal{}, fmt.Errorf("authenticating: %w", err)
	}
	if !auth.Matches(key, hash) {
		return auth.Principal{}, auth.ErrUnknownKey
	}
	c.store(gen, func() { c.keys[prefix] = keyEntry{hash: hash, principal: p} })
	return p, nil
}
