package dispatch

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// everyRule holds each validation rule the request types use, on each kind it is used on.
type everyRule struct {
	Required   string   `json:"required" validate:"required"`
	MaxString  string   `json:"max_string" validate:"max=3"`
	MinString  string   `json:"min_string" validate:"min=2"`
	MaxNumber  float64  `json:"max_number" validate:"max=2"`
	MinNumber  int      `json:"min_number" validate:"min=1"`
	MaxList    []string `json:"max_list" validate:"max=1"`
	DiveList   []string `json:"dive_list" validate:"dive,min=1"`
	MinList    []string `json:"min_list" validate:"min=2"`
	OneOf      string   `json:"one_of" validate:"oneof=a b"`
	JobType    string   `json:"job_type" validate:"jobtype"`
	URL        string   `json:"url" validate:"httpurl"`
	UUID       string   `json:"uuid" validate:"uuid"`
	PrintASCII string   `json:"print_ascii" validate:"printascii"`
}

func TestEveryRuleSaysItsLimit(t *testing.T) {
	t.Parallel()
	got := map[string]string{}
	for _, f := range NewValidator().Struct(everyRule{MaxString: "abcd", MinString: "a", MaxNumber: 2.5, MinNumber: -1,
		MaxList: []string{"a", "b"}, DiveList: []string{""}, MinList: []string{"a"}, OneOf: "c", JobType: "X", URL: "ftp://x", UUID: "u", PrintASCII: "é"}) {
		got[f.Field] = f.Message
	}
	require.Equal(t, map[string]string{
		"required":     "is required",
		"max_string":   "must be at most 3 characters",
		"min_string":   "must be at least 2 characters",
		"max_number":   "must be at most 2",
		"min_number":   "must be at least 1",
		"max_list":     "must have at most 1 item",
		"dive_list[0]": "must be at least 1 character",
		"min_list":     "must have at least 2 items",
		"one_of":       "must be one of: a, b",
		"job_type":     "must match ^[a-z][a-z0-9_.-]{0,127}$: lower-case letters, digits, '_', '.' and '-', starting with a letter",
		"url":          "must be an http or https URL with a host",
		"uuid":         "must be a UUID",
		"print_ascii":  "must be printable ASCII",
	}, got)
}

// TestEveryRuleInUseIsCovered keeps everyRule honest: a rule added to a request type must be
// added there, with a message of its own.
func TestEveryRuleInUseIsCovered(t *testing.T) {
	t.Parallel()
	covered := map[string]bool{"omitempty": true, "dive": true}
	for _, m := range regexp.MustCompile(`validate:"([^"]*)"`).FindAllStringSubmatch(everyRuleSource(t), -1) {
		for _, r := range strings.Split(m[1], ",") {
			covered[strings.SplitN(r, "=", 2)[0]] = true
		}
	}
	for _, dir := range []string{"../..", "../../../shared"} {
		for _, tag := range tagsIn(t, dir) {
			require.True(t, covered[tag], "rule %q is used but not in everyRule", tag)
		}
	}
}

func everyRuleSource(t *testing.T) string {
	b, err := os.ReadFile("request_test.go")
	require.NoError(t, err)
	i := bytes.Index(b, []byte("type everyRule struct"))
	j := bytes.Index(b[i:], []byte("\n}\n"))
	return string(b[i : i+j])
}

// tagsIn returns the validation rules used in the non-test Go files under dir.
func tagsIn(t *testing.T, dir string) []string {
	var tags []string
	re := regexp.MustCompile(`validate:"([^"]*)"`)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			for _, r := range strings.Split(m[1], ",") {
				tags = append(tags, strings.SplitN(r, "=", 2)[0])
			}
		}
		return nil
	})
	require.NoError(t, err)
	return tags
}

func decodeFields(t *testing.T, body string, dst any) map[string]string {
	t.Helper()
	err := Decode(strings.NewReader(body), NewValidator(), dst)
	if err == nil {
		return nil
	}
	ae := apierr.As(err)
	require.Equal(t, "VALIDATION_FAILED", ae.Code, "%v", err)
	got := map[string]string{}
	for _, f := range ae.Context["fields"].([]FieldError) {
		got[f.Field] = f.Rule + ": " + f.Message
	}
	return got
}

func TestDecodeNamesEveryField(t *testing.T) {
	t.Parallel()
	var r Request
	require.Equal(t, map[string]string{
		"$": "json: has data after the JSON value",
	}, decodeFields(t, `{"job_type":"a","payload":{}} {}`, &r))
	require.Equal(t, map[string]string{
		"$": "json: is not valid JSON (at byte 26, in payload): unexpected EOF",
	}, decodeFields(t, `{"job_type":"a","payload":`, &r))
	require.Equal(t, map[string]string{
		"$": "type: must be an object",
	}, decodeFields(t, `[1]`, &r))
	require.Equal(t, map[string]string{
		"$": "required: the body is empty",
	}, decodeFields(t, " \n", &r))
	got := decodeFields(t, `{"Job_Type":1,"payload":{},"metadata":{"parent_job_id":"x","a":{"b":1}},"x":[]}`, &r)
	require.Equal(t, "type: must be a string", got["job_type"], "members match fields ignoring case, as encoding/json does")
	require.Equal(t, "uuid: must be a UUID", got["metadata.parent_job_id"])
	require.Contains(t, got["metadata.a"], "unknown_field: is not a known field")
	require.Contains(t, got["x"], "unknown_field: is not a known field")
	require.Len(t, got, 4)

	var b BatchRequest
	got = decodeFields(t, `{"items":[{"a":1},{"a":1,"a":2}]}`, &b)
	require.Equal(t, map[string]string{"items[1].a": "duplicate_key: appears more than once in its object; send each member once"}, got)

	var n struct {
		N  int8   `json:"n"`
		U  uint16 `json:"u"`
		B  bool   `json:"b"`
		By []byte `json:"by"`
	}
	got = decodeFields(t, `{"n":300,"u":-1,"b":"yes","by":"%"}`, &n)
	require.Equal(t, map[string]string{
		"n":  "type: must be a whole number from -128 to 127",
		"u":  "type: must be a whole number from 0 to 65535",
		"b":  "type: must be true or false",
		"by": "type: must be a base64 string",
	}, got)
}
