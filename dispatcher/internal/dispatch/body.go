package dispatch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// nulEscape is how a NUL character appears in JSON text: a raw NUL byte is not valid JSON.
var nulEscape = []byte(`\u0000`)

// checkBody reports what makes a request body unfit to be decoded and stored, each problem
// by its JSON path: a body that is not one JSON value; a member name that appears twice in
// an object (encoding/json would silently keep the last, so a reader of the first would see
// another request); text that is not valid Unicode (invalid UTF-8, an unpaired surrogate
// escape); and the NUL character, which PostgreSQL stores in neither text nor jsonb.
//
// The common case — a valid body without the six bytes \u0000 — costs one validation pass
// (RFC 7493, I-JSON, which is exactly: valid JSON, valid Unicode, unique member names);
// only a body that fails it is walked token by token to name the fields.
func checkBody(b []byte) []FieldError {
	if jsontext.Value(b).IsValid() && !bytes.Contains(b, nulEscape) {
		return nil
	}
	return walkBody(b)
}

func walkBody(b []byte) []FieldError {
	dec := jsontext.NewDecoder(bytes.NewReader(b))
	var out []FieldError
	done := false // the body's one value has been read
	for {
		name := dec.StackDepth() > 0 && isNameNext(dec)
		tok, err := dec.ReadToken()
		switch {
		case errors.Is(err, io.EOF):
			return out
		case done:
			return append(out, FieldError{Field: "$", Rule: "json", Message: "has data after the JSON value"})
		case err != nil:
			return append(out, syntaxError(dec, err))
		}
		done = dec.StackDepth() == 0
		if tok.Kind() == '"' && strings.IndexByte(tok.String(), 0) >= 0 {
			if name {
				out = append(out, FieldError{Field: fieldPath(dec, dec.StackPointer()), Rule: "nul",
					Message: `is a member name with the NUL character (\u0000), which cannot be stored`})
			} else {
				out = append(out, FieldError{Field: fieldPath(dec, dec.StackPointer()), Rule: "nul",
					Message: `must not contain the NUL character (\u0000), which cannot be stored`})
			}
		}
	}
}

// isNameNext reports whether the decoder's next token is an object member's name.
func isNameNext(dec *jsontext.Decoder) bool {
	kind, n := dec.StackIndex(dec.StackDepth())
	return kind == '{' && n%2 == 0
}

func syntaxError(dec *jsontext.Decoder, err error) FieldError {
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		return FieldError{Field: "$", Rule: "json", Message: "is not valid JSON"}
	}
	field := fieldPath(dec, se.JSONPointer)
	switch text := se.Err.Error(); {
	case errors.Is(se.Err, jsontext.ErrDuplicateName):
		return FieldError{Field: field, Rule: "duplicate_key",
			Message: "appears more than once in its object; send each member once"}
	case strings.Contains(text, "UTF-8") || strings.Contains(text, "surrogate"):
		return FieldError{Field: field, Rule: "utf8",
			Message: "must be valid Unicode: UTF-8 text, with no unpaired surrogate escape (\\ud800-\\udfff)"}
	default:
		return FieldError{Field: "$", Rule: "json",
			Message: fmt.Sprintf("is not valid JSON (at byte %d, in %s): %s", se.ByteOffset, displayPath(field), text)}
	}
}

// fieldPath turns a JSON Pointer of the value being decoded ("/payload/messages/0") into
// the path style of every field error ("payload.messages[0]"); "$" is the whole body.
func fieldPath(dec *jsontext.Decoder, p jsontext.Pointer) string {
	path, level := "", 1
	for tok := range p.Tokens() {
		kind := jsontext.Kind('{')
		if level <= dec.StackDepth() {
			kind, _ = dec.StackIndex(level)
		}
		if kind == '[' {
			path += "[" + tok + "]"
		} else {
			path = joinPath(path, tok)
		}
		level++
	}
	if path == "" {
		return "$"
	}
	return path
}

// joinPath appends a member name to a field path. A NUL in the name is shown escaped.
func joinPath(parent, name string) string {
	name = strings.ReplaceAll(name, "\x00", `\u0000`)
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func indexPath(parent string, i int) string { return parent + "[" + strconv.Itoa(i) + "]" }

func displayPath(field string) string {
	if field == "$" {
		return "the body"
	}
	return field
}
