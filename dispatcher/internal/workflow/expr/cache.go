package expr

import (
	"strings"
	"sync"
)

// Cache keeps conditions and templates parsed, by their source and contexts, so that a
// definition evaluated again and again — a workflow's rules, at every step of every run —
// parses each expression once. It holds what it was given, so keep one per definition (the
// workflow's Rules); a parse error is not kept. The zero value is ready, a nil *Cache parses
// every time, and it is safe for concurrent use.
type Cache struct {
	mu    sync.Mutex
	conds map[cacheKey]*Expr
	tmpls map[cacheKey][]part
}

type cacheKey struct{ src, contexts string }

func keyOf(src string, contexts []string) cacheKey {
	return cacheKey{src, strings.Join(contexts, "\x00")}
}

// condition parses an if: (a ${{ }} around it is optional; empty is success()).
func (c *Cache) condition(src string, contexts []string) (*Expr, error) {
	return cached(c, func() map[cacheKey]*Expr { return c.conds },
		func(m map[cacheKey]*Expr) { c.conds = m }, src, contexts, func() (*Expr, error) {
			inner := strings.TrimSpace(src)
			if w, ok := wrapped(inner); ok {
				inner = strings.TrimSpace(w)
			}
			if inner == "" {
				inner = "success()"
			}
			return Parse(inner, contexts)
		})
}

// template parses a string with ${{ }} parts.
func (c *Cache) template(tmpl string, contexts []string) ([]part, error) {
	return cached(c, func() map[cacheKey][]part { return c.tmpls },
		func(m map[cacheKey][]part) { c.tmpls = m }, tmpl, contexts, func() ([]part, error) {
			return parseTemplate(tmpl, contexts)
		})
}

// cached returns the value kept for (src, contexts) in the map get returns, parsing and
// keeping it the first time; a nil cache only parses.
func cached[V any](c *Cache, get func() map[cacheKey]V, set func(map[cacheKey]V), src string, contexts []string,
	parse func() (V, error)) (V, error) {
	if c == nil {
		return parse()
	}
	k := keyOf(src, contexts)
	c.mu.Lock()
	v, ok := get()[k]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := parse()
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m := get()
	if m == nil {
		m = map[cacheKey]V{}
		set(m)
	}
	m[k] = v
	return v, nil
}
