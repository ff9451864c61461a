package chain

import (
	"bytes"
	"fmt"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/switchyard-ai/switchyard/runstore"
)

// A transition reads the chain's stored definition; decoding it, and for a workflow the
// plan its Rules read, is the same work on every transition of the chain — for a workflow
// of 200 jobs about 3.5 ms of CPU (docs/PERFORMANCE.md "Workflows"). The coordinator keeps
// what it decoded for each chain in flight, by chain id, with a copy of the stored bytes it
// came from: a stored definition that differs is decoded again, so the cache can only save
// work, never run a chain on another definition. Neither the engine nor the Rules change a
// definition or Rules once decoded, and a chain's transitions take its lock one at a time.

// decodedChains bounds the cache: about the chains a dispatcher has in flight at once. A
// chain's entry is dropped when a transition ends it; the bound evicts the least recently
// used of those another dispatcher ended.
const decodedChains = 512

type decodedCache struct {
	once sync.Once
	lru  *lru.Cache[string, *decoded]
}

type decoded struct {
	raw   []byte
	def   *Definition
	rules Rules
}

func (d *decodedCache) get() *lru.Cache[string, *decoded] {
	d.once.Do(func() {
		var err error
		if d.lru, err = lru.New[string, *decoded](decodedChains); err != nil {
			panic(err) // only for a size below 1
		}
	})
	return d.lru
}

// decode returns the chain's definition and, for a workflow, its Rules: decoded once per
// chain and stored definition.
func (c *Coordinator) decode(ch runstore.Chain) (*Definition, Rules, error) {
	cache := c.decoded.get()
	if d, ok := cache.Get(ch.ID); ok && bytes.Equal(d.raw, ch.Definition) {
		return d.def, d.rules, nil
	}
	def, errs := Parse(ch.Definition, nil)
	if errs != nil {
		return nil, nil, fmt.Errorf("%w: chain %s: %s", errUnreadable, ch.ID, errs[0].Message)
	}
	var rules Rules
	if def.Workflow != nil {
		if c.Rules == nil {
			return nil, nil, fmt.Errorf("%w: chain %s is a workflow and this coordinator has no workflow rules", errUnreadable, ch.ID)
		}
		var err error
		if rules, err = c.Rules(def); err != nil {
			return nil, nil, fmt.Errorf("%w: chain %s: %w", errUnreadable, ch.ID, err)
		}
	}
	cache.Add(ch.ID, &decoded{raw: bytes.Clone(ch.Definition), def: def, rules: rules})
	return def, rules, nil
}

// forget drops an ended chain's entry.
func (c *Coordinator) forget(chainID string) { c.decoded.get().Remove(chainID) }
