package api_test

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/client"
	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/dispatcher/internal/dispatch"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/event"
	"github.com/switchyard-ai/switchyard/shared/run"
	"github.com/switchyard-ai/switchyard/shared/skill"
	"github.com/switchyard-ai/switchyard/shared/span"
)

// schemaDoc is an OpenAPI document's schemas, kept as generic JSON.
type schemaDoc struct {
	schemas map[string]map[string]any
}

func loadSchemas(t *testing.T) schemaDoc {
	t.Helper()
	raw, err := os.ReadFile("openapi.json")
	require.NoError(t, err)
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	return schemaDoc{schemas: doc.Components.Schemas}
}

// resolve follows a $ref and merges allOf into one schema of properties and required.
func (d schemaDoc) resolve(s map[string]any) map[string]any {
	if ref, ok := s["$ref"].(string); ok {
		return d.resolve(d.schemas[strings.TrimPrefix(ref, "#/components/schemas/")])
	}
	all, ok := s["allOf"].([]any)
	if !ok {
		return s
	}
	props, required := map[string]any{}, []any{}
	for _, part := range all {
		p := d.resolve(part.(map[string]any))
		for k, v := range asMap(p["properties"]) {
			props[k] = v
		}
		r, _ := p["required"].([]any)
		required = append(required, r...)
	}
	return map[string]any{"type": "object", "properties": props, "required": required}
}

func asMap(v any) map[string]any { m, _ := v.(map[string]any); return m }

// types returns a schema's types ("type" is a string or, in OpenAPI 3.1, a list).
func types(s map[string]any) []string {
	switch t := s["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, x := range t {
			out = append(out, x.(string))
		}
		return out
	}
	return nil
}

// jsonField is one member a Go type encodes.
type jsonField struct {
	name      string
	typ       reflect.Type
	omitEmpty bool
}

// jsonFields lists the members encoding/json writes for a struct type, embedded structs
// flattened and outer names winning over inner ones.
func jsonFields(t reflect.Type) []jsonField {
	var out []jsonField
	seen := map[string]bool{}
	var embedded []reflect.Type
	for f := range t.Fields() {
		tag := f.Tag.Get("json")
		name, opts, _ := strings.Cut(tag, ",")
		if tag == "-" || !f.IsExported() && !f.Anonymous {
			continue
		}
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				embedded = append(embedded, et)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		seen[name] = true
		out = append(out, jsonField{name: name, typ: f.Type,
			omitEmpty: strings.Contains(opts, "omitempty") || strings.Contains(opts, "omitzero")})
	}
	for _, et := range embedded {
		for _, f := range jsonFields(et) {
			if !seen[f.name] {
				seen[f.name] = true
				out = append(out, f)
			}
		}
	}
	return out
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	timeType       = reflect.TypeFor[time.Time]()
	apiErrorType   = reflect.TypeFor[client.APIError]()
)

// check compares a Go type with a schema and returns the differences, each naming its path.
// answer marks a type the dispatcher writes: a required member must then never be omitted.
func (d schemaDoc) check(path string, s map[string]any, t reflect.Type, answer bool) []string {
	return d.checkOnce(path, s, t, answer, map[string]bool{})
}

// checkOnce is check that compares a named schema with a Go type once: recursive schemas
// (SpanNode's children) end there.
func (d schemaDoc) checkOnce(path string, s map[string]any, t reflect.Type, answer bool, seen map[string]bool) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if ref, ok := s["$ref"].(string); ok {
		if seen[ref+" "+t.String()] {
			return nil
		}
		seen[ref+" "+t.String()] = true
	}
	s = d.resolve(s)
	ts := types(s)
	if t == rawMessageType || t.Kind() == reflect.Interface || len(ts) == 0 {
		return nil // any JSON value, or passed through as it is
	}
	if ts = slices.DeleteFunc(slices.Clone(ts), func(x string) bool { return x == "null" }); len(ts) != 1 {
		return nil // a union: not checked
	}
	kindOK := map[string]func() bool{
		"string":  func() bool { return t.Kind() == reflect.String || t == timeType },
		"integer": func() bool { return t.Kind() >= reflect.Int && t.Kind() <= reflect.Uint64 },
		"number":  func() bool { return t.Kind() == reflect.Float64 || t.Kind() == reflect.Float32 },
		"boolean": func() bool { return t.Kind() == reflect.Bool },
		"array":   func() bool { return t.Kind() == reflect.Slice || t.Kind() == reflect.Array },
		"object":  func() bool { return t.Kind() == reflect.Struct && t != timeType || t.Kind() == reflect.Map },
	}[ts[0]]
	if kindOK == nil || !kindOK() {
		return []string{fmt.Sprintf("%s: the document says %s, the Go type is %s", path, ts[0], t)}
	}
	switch {
	case ts[0] == "array":
		if items := asMap(s["items"]); items != nil {
			return d.checkOnce(path+"[]", items, t.Elem(), answer, seen)
		}
	case ts[0] == "object" && t.Kind() == reflect.Struct:
		props := asMap(s["properties"])
		if props == nil {
			return nil // free-form object
		}
		var problems []string
		required, _ := s["required"].([]any)
		fields := jsonFields(t)
		for _, f := range fields {
			ps, ok := props[f.name]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s.%s: encoded by %s, missing from the document", path, f.name, t))
				continue
			}
			if answer && f.omitEmpty && slices.Contains(required, any(f.name)) {
				problems = append(problems, fmt.Sprintf("%s.%s: required by the document, omitted when empty by %s", path, f.name, t))
			}
			problems = append(problems, d.checkOnce(path+"."+f.name, ps.(map[string]any), f.typ, answer, seen)...)
		}
		for name := range props {
			if !slices.ContainsFunc(fields, func(f jsonField) bool { return f.name == name }) &&
				!(t == apiErrorType && name == "error") { // the client knows every error body says true
				problems = append(problems, fmt.Sprintf("%s.%s: in the document, not a member of %s", path, name, t))
			}
		}
		return problems
	}
	return nil
}

// schemaPairs are the types of the public API and the schema each must match: the shared
// apitypes first, then the types only one side declares.
var schemaPairs = []struct {
	schema string
	typ    reflect.Type
	answer bool // the dispatcher writes it (false: it reads it)
}{
	{"Run", reflect.TypeFor[apitypes.Run](), true},
	{"Timings", reflect.TypeFor[apitypes.Timings](), true},
	{"Billing", reflect.TypeFor[apitypes.Billing](), true},
	{"HoldReason", reflect.TypeFor[apitypes.HoldReason](), true},
	{"StatusAnswer", reflect.TypeFor[apitypes.StatusAnswer](), true},
	{"Key", reflect.TypeFor[apitypes.Key](), true},
	{"KeyCreate", reflect.TypeFor[apitypes.KeyCreate](), false},
	{"CreatedKey", reflect.TypeFor[apitypes.KeyCreated](), true},
	{"Org", reflect.TypeFor[apitypes.Org](), true},
	{"OrgPatch", reflect.TypeFor[apitypes.OrgPatch](), false},
	{"OrgCreate", reflect.TypeFor[apitypes.OrgCreate](), false},
	{"OperatorOrgPatch", reflect.TypeFor[apitypes.OperatorOrgPatch](), false},
	{"OrgSuspend", reflect.TypeFor[apitypes.OrgSuspend](), false},
	{"OrgSuspended", reflect.TypeFor[apitypes.OrgSuspended](), true},
	{"OrgAuditEntry", reflect.TypeFor[apitypes.OrgAuditEntry](), true},
	{"OrgDetail", reflect.TypeFor[apitypes.OrgDetail](), true},
	{"AdminKeyCreate", reflect.TypeFor[apitypes.AdminKeyCreate](), false},
	{"Queue", reflect.TypeFor[apitypes.Queue](), true},
	{"Usage", reflect.TypeFor[apitypes.Usage](), true},
	{"AuditRecord", reflect.TypeFor[apitypes.AuditRecord](), true},
	{"Metadata", reflect.TypeFor[apitypes.Metadata](), false},
	{"FieldError", reflect.TypeFor[apitypes.FieldError](), true},
	{"Error", reflect.TypeFor[apierr.Body](), true},
	{"Chain", reflect.TypeFor[apitypes.Chain](), true},
	{"ChainStep", reflect.TypeFor[apitypes.ChainStep](), true},
	{"ChainSummary", reflect.TypeFor[apitypes.ChainSummary](), true},
	{"ChainList", reflect.TypeFor[apitypes.ChainList](), true},
	{"ChainControl", reflect.TypeFor[apitypes.ChainControl](), true},
	{"Provider", reflect.TypeFor[apitypes.Provider](), true},
	{"ProviderSpec", reflect.TypeFor[apitypes.ProviderSpec](), false},
	{"CredentialInfo", reflect.TypeFor[apitypes.CredentialInfo](), true},
	{"CredentialSet", reflect.TypeFor[apitypes.CredentialSet](), false},
	{"RoutingPolicy", reflect.TypeFor[apitypes.RoutingPolicy](), true},
	{"RoutingRule", reflect.TypeFor[apitypes.RoutingRule](), true},
	{"ProviderLimit", reflect.TypeFor[apitypes.ProviderLimit](), true},
	{"Price", reflect.TypeFor[apitypes.Price](), true},
	{"ProviderTest", reflect.TypeFor[apitypes.ProviderTest](), true},
	{"LimitSet", reflect.TypeFor[apitypes.LimitSet](), false},
	{"PriceSet", reflect.TypeFor[apitypes.PriceSet](), false},

	// The dispatcher's own.
	{"DispatchRequest", reflect.TypeFor[dispatch.Request](), false},
	{"DispatchResult", reflect.TypeFor[dispatch.Result](), true},
	{"BatchResult", reflect.TypeFor[dispatch.BatchResult](), true},
	{"BatchItem", reflect.TypeFor[dispatch.BatchItem](), true},
	{"StatusAnswer", reflect.TypeFor[dispatch.ControlResult](), true},
	{"Span", reflect.TypeFor[span.Span](), true},
	{"SpanNode", reflect.TypeFor[span.Node](), true},
	{"Event", reflect.TypeFor[event.Envelope](), true},
	{"Skill", reflect.TypeFor[skill.Skill](), true},
	{"SkillChange", reflect.TypeFor[skill.Change](), true},

	// The client's own.
	{"DispatchRequest", reflect.TypeFor[client.DispatchRequest](), false},
	{"DispatchResult", reflect.TypeFor[client.DispatchResult](), false},
	{"BatchResult", reflect.TypeFor[client.BatchResult](), false},
	{"Span", reflect.TypeFor[client.Span](), false},
	{"SpanNode", reflect.TypeFor[client.SpanNode](), false},
	{"Spans", reflect.TypeFor[client.Spans](), false},
	{"Event", reflect.TypeFor[client.Event](), false},
	{"RunPage", reflect.TypeFor[client.RunPage](), false},
	{"Review", reflect.TypeFor[client.Review](), false},
	{"Skill", reflect.TypeFor[client.Skill](), false},
	{"SkillChange", reflect.TypeFor[client.SkillChange](), false},
}

// TestSchemasMatchTypes checks the OpenAPI document's schemas against the Go types the
// dispatcher encodes and the client decodes: the same members, compatible JSON types, and
// no required member that the dispatcher may leave out.
func TestSchemasMatchTypes(t *testing.T) {
	t.Parallel()
	d := loadSchemas(t)
	var problems []string
	for _, p := range schemaPairs {
		s, ok := d.schemas[p.schema]
		require.True(t, ok, "no schema %s", p.schema)
		problems = append(problems, d.check(p.schema+"("+p.typ.String()+")", s, p.typ, p.answer)...)
	}
	slices.Sort(problems)
	require.Empty(t, problems, "internal/api/openapi.json and the Go types disagree:\n%s", strings.Join(problems, "\n"))
}

func TestSchemaCheckCatchesDrift(t *testing.T) {
	t.Parallel()
	d := schemaDoc{schemas: map[string]map[string]any{}}
	var s map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{"type":"object","required":["a"],"properties":{
		"a":{"type":"string"},"b":{"type":["integer","null"]},"c":{"type":"array","items":{"type":"number"}}}}`), &s))
	type good struct {
		A string    `json:"a"`
		B *int      `json:"b"`
		C []float64 `json:"c,omitempty"`
	}
	require.Empty(t, d.check("x", s, reflect.TypeFor[good](), true))
	type extra struct {
		good
		D bool `json:"d"`
	}
	require.Len(t, d.check("x", s, reflect.TypeFor[extra](), true), 1, "a member the document lacks")
	type missing struct {
		A string `json:"a"`
		B *int   `json:"b"`
	}
	require.Len(t, d.check("x", s, reflect.TypeFor[missing](), true), 1, "a documented member the type lacks")
	type wrongType struct {
		A int       `json:"a"`
		B *int      `json:"b"`
		C []float64 `json:"c"`
	}
	require.Len(t, d.check("x", s, reflect.TypeFor[wrongType](), true), 1, "a member of another JSON type")
	type omitted struct {
		A string    `json:"a,omitempty"`
		B *int      `json:"b"`
		C []float64 `json:"c"`
	}
	require.Len(t, d.check("x", s, reflect.TypeFor[omitted](), true), 1, "a required member omitted when empty")
	require.Empty(t, d.check("x", s, reflect.TypeFor[omitted](), false), "a request may omit it")
}

// TestStatusEnumsMatch checks the document's run statuses and priorities against apitypes
// and the lifecycle in shared/run: the same values, and the same terminal ones.
func TestStatusEnumsMatch(t *testing.T) {
	t.Parallel()
	d := loadSchemas(t)
	enum := func(name string) []string {
		var out []string
		for _, v := range d.schemas[name]["enum"].([]any) {
			out = append(out, v.(string))
		}
		return out
	}
	statuses := enum("Status")
	require.Len(t, statuses, 12)
	for _, v := range statuses {
		require.True(t, run.Status(v).Valid(), v)
		require.Equal(t, run.Status(v).Terminal(), apitypes.Status(v).Terminal(), v)
	}
	require.Equal(t, []string{string(apitypes.PriorityCritical), string(apitypes.PriorityHigh),
		string(apitypes.PriorityNormal), string(apitypes.PriorityLow)}, enum("Priority"))
	var lifecycle []string
	for _, p := range run.Priorities {
		lifecycle = append(lifecycle, string(p))
	}
	require.Equal(t, lifecycle, enum("Priority"))
}
