package dispatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"github.com/go-playground/validator/v10"

	"github.com/switchyard-ai/switchyard/client/apitypes"
	"github.com/switchyard-ai/switchyard/shared/apierr"
	"github.com/switchyard-ai/switchyard/shared/payload"
)

// Request is the body of POST /api/v1/dispatch.
type Request struct {
	JobType        string          `json:"job_type" validate:"required,max=128,jobtype"`
	UserID         string          `json:"user_id" validate:"max=256"`
	Payload        json.RawMessage `json:"payload" validate:"required"`
	CallbackURL    string          `json:"callback_url" validate:"omitempty,max=2048,httpurl"`
	Priority       string          `json:"priority" validate:"omitempty,oneof=critical high normal low"`
	IdempotencyKey string          `json:"idempotency_key" validate:"omitempty,max=256,printascii"`
	Metadata       *Metadata       `json:"metadata"`
}

// Metadata is what the calling service says about the job; it is stored, not trusted.
type Metadata = apitypes.Metadata

// FieldError is one failing field of a request.
type FieldError = apitypes.FieldError

var jobTypeRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,127}$`)

// orgSlugRE is what orgs.slug accepts (migrations/sql/00001_registry.sql).
var orgSlugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,62}$`)

// Validator checks request structs and names failing fields by their JSON path.
type Validator struct{ v *validator.Validate }

// NewValidator returns the validator used for every request body.
func NewValidator() *Validator {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			return ""
		}
		return name
	})
	must(v.RegisterValidation("jobtype", func(fl validator.FieldLevel) bool {
		return jobTypeRE.MatchString(fl.Field().String())
	}))
	must(v.RegisterValidation("orgslug", func(fl validator.FieldLevel) bool {
		return orgSlugRE.MatchString(fl.Field().String())
	}))
	must(v.RegisterValidation("httpurl", func(fl validator.FieldLevel) bool {
		u, err := url.Parse(fl.Field().String())
		return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
	}))
	return &Validator{v: v}
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// Struct validates s and returns every failing field.
func (v *Validator) Struct(s any) []FieldError {
	err := v.v.Struct(s)
	if err == nil {
		return nil
	}
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		return []FieldError{{Field: "$", Rule: "invalid", Message: err.Error()}}
	}
	out := make([]FieldError, 0, len(verrs))
	for _, fe := range verrs {
		ns := fe.Namespace()
		if _, rest, ok := strings.Cut(ns, "."); ok {
			ns = rest
		}
		out = append(out, FieldError{Field: ns, Rule: fe.Tag(), Message: ruleMessage(fe)})
	}
	return out
}

// ruleMessage says what a failed rule wants, with its parameter, in the caller's terms.
func ruleMessage(fe validator.FieldError) string {
	p := fe.Param()
	switch fe.Tag() {
	case "required":
		return "is required"
	case "max":
		return bound("at most", fe.Kind(), p)
	case "min":
		return bound("at least", fe.Kind(), p)
	case "oneof":
		return "must be one of: " + strings.Join(strings.Fields(p), ", ")
	case "jobtype":
		return "must match ^[a-z][a-z0-9_.-]{0,127}$: lower-case letters, digits, '_', '.' and '-', starting with a letter"
	case "httpurl":
		return "must be an http or https URL with a host"
	case "orgslug":
		return "must match ^[a-z0-9][a-z0-9-]{1,62}$: lower-case letters, digits and '-', 2 to 63 characters"
	case "uuid":
		return "must be a UUID"
	case "printascii":
		return "must be printable ASCII"
	}
	if p != "" {
		return fmt.Sprintf("fails rule %s=%s", fe.Tag(), p)
	}
	return "fails rule " + fe.Tag()
}

// bound says a min or max rule with its parameter and unit: characters for strings (the
// validator counts runes), items for lists and maps, nothing for numbers.
func bound(which string, k reflect.Kind, n string) string {
	plural := ""
	if n != "1" {
		plural = "s"
	}
	switch k {
	case reflect.String:
		return "must be " + which + " " + n + " character" + plural
	case reflect.Slice, reflect.Array, reflect.Map:
		return "must have " + which + " " + n + " item" + plural
	}
	return "must be " + which + " " + n
}

// ValidationFailed is the 400 answer listing every failing field.
func ValidationFailed(fields []FieldError) *apierr.Error {
	return apierr.New(http.StatusBadRequest, apierr.CodeValidationFailed, "The request body is invalid.",
		"Fix every field listed in context.fields and send the request again.",
		"The request schema is in /api/v1/openapi.json.").With("fields", fields)
}

// PayloadTooLarge is the 413 answer for a body over the limit.
func PayloadTooLarge(limit int64) *apierr.Error {
	return apierr.New(http.StatusRequestEntityTooLarge, apierr.CodePayloadTooLarge,
		fmt.Sprintf("The request body is larger than the limit of %d bytes.", limit),
		"Send a smaller body: split a batch into several, or keep large documents out of the payload and send a reference to them.").
		With("limit_bytes", limit)
}

// Decode reads a JSON body strictly into dst and validates it. Refused, each by its field's
// JSON path: a body that is not one JSON value, a member name that appears twice in one
// object, text that is not valid Unicode or holds a NUL (checkBody); values of the wrong
// type and unknown members, every one of them (shapeErrors); and every field breaking a
// validation rule. A body over the limit of http.MaxBytesReader is PAYLOAD_TOO_LARGE.
func Decode(body io.Reader, v *Validator, dst any) error { return decode(body, v, dst, checkBody) }

// decode is Decode with the check of the body's text given: DecodeBatch leaves what is wrong
// inside an item to that item.
func decode(body io.Reader, v *Validator, dst any, check func([]byte) []FieldError) error {
	buf := bodies.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 64<<10 { // a rare large body is not kept
			buf.Reset()
			bodies.Put(buf)
		}
	}()
	_, err := buf.ReadFrom(body)
	b := buf.Bytes() // encoding/json copies what it keeps (json.RawMessage too)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return PayloadTooLarge(tooLarge.Limit)
	case err != nil:
		return ValidationFailed([]FieldError{{Field: "$", Rule: "json", Message: "could not be read to its end"}})
	case len(bytes.TrimSpace(b)) == 0:
		return ValidationFailed([]FieldError{{Field: "$", Rule: "required", Message: "the body is empty"}})
	}
	if fields := check(b); len(fields) > 0 {
		return ValidationFailed(fields)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var shape []FieldError
	if err := dec.Decode(dst); err != nil {
		// encoding/json decoded what it could and named only its first complaint.
		if shape = shapeErrors(b, reflect.TypeOf(dst).Elem()); len(shape) == 0 {
			shape = []FieldError{decodeError(err)}
		}
	}
	return merge(shape, v.Struct(dst))
}

// bodies are the buffers Decode reads bodies into.
var bodies = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// merge answers the shape errors and the rule errors of fields that have the right shape;
// a field of the wrong type fails its rules only because it could not be decoded.
func merge(shape, rules []FieldError) error {
	fields := shape
	for _, r := range rules {
		covered := false
		for _, s := range shape {
			if s.Field == "$" || r.Field == s.Field || strings.HasPrefix(r.Field, s.Field+".") || strings.HasPrefix(r.Field, s.Field+"[") {
				covered = true
				break
			}
		}
		if !covered {
			fields = append(fields, r)
		}
	}
	if len(fields) == 0 {
		return nil
	}
	return ValidationFailed(fields)
}

// decodeError describes an encoding/json error that shapeErrors did not explain; it is a
// guard, and it keeps Go type names out of the answer.
func decodeError(err error) FieldError {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "$"
		}
		return FieldError{Field: field, Rule: "type", Message: "must be " + jsonKind(te.Type)}
	}
	return FieldError{Field: "$", Rule: "json", Message: "does not have the shape this endpoint takes (/api/v1/openapi.json)"}
}

// IsObject reports whether raw is a JSON object.
func IsObject(raw json.RawMessage) bool { return payload.IsObject(raw) }
