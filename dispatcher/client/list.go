package client

import "encoding/json"

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
