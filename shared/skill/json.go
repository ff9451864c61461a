package skill

import (
	"encoding/json"
	"fmt"
)

// toJSON turns a decoded YAML tree into JSON; nil stays nil.
func toJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(normalize(v))
	if err != nil {
		return nil, err
	}
	return b, nil
}

// normalize turns map[any]any (older YAML decoders) into map[string]any for JSON.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = normalize(x)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[fmt.Sprint(k)] = normalize(x)
		}
		return m
	case []any:
		for i, x := range t {
			t[i] = normalize(x)
		}
		return t
	}
	return v
}
