package client

import (
	"encoding/json"
	"iter"
)

// list decodes a collection answered either as a bare JSON array or as an object holding
// the array under one of the usual keys ("items", "events", ...). docs/api.md fixes
// {"items": [...]} only for GET /api/v1/dispatch; accepting both keeps the client working
// whichever form a route answers.
type list[T any] struct{ items []T }

var listKeys = []string{"items", "events", "skills", "keys", "queues", "history", "changes", "reviews"}

func (l *list[T]) UnmarshalJSON(b []byte) error {
	if err := json.Unmarshal(b, &l.items); err == nil {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return err
	}
	for _, k := range listKeys {
		if raw, ok := obj[k]; ok {
			return json.Unmarshal(raw, &l.items)
		}
	}
	return nil
}

// pages iterates over every item of a paged listing, starting at cursor ("" for the first
// page). fetch returns one page and the cursor of the next, "" on the last. It stops at the
// first error, which it yields, and when a page is empty or names itself as the next one.
func pages[T any](cursor string, fetch func(cursor string) ([]T, string, error)) iter.Seq2[T, error] {
	return func(yield func(T, error) bool) {
		for {
			items, next, err := fetch(cursor)
			if err != nil {
				var zero T
				yield(zero, err)
				return
			}
			for _, it := range items {
				if !yield(it, nil) {
					return
				}
			}
			if next == "" || next == cursor || len(items) == 0 {
				return
			}
			cursor = next
		}
	}
}
