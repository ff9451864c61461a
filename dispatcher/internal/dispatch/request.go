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

	"github.com/go-playground/validator/v10"

	"github.com/switchyard-ai/switchyard/shared/apierr"
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
type Metadata struct {
	SourceService string `json:"source_service,omitempty" validate:"max=128"`
	CorrelationID string `json:"correlation_id,omitempty" validate:"max=256"`
	ParentJobID   string `json:"parent_job_id,omitempty" validate:"omitempty,uuid"`
}

// FieldError is one failing field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

var jobTypeRE = regexp.MustCompile(`^[a-z][a-z0-9_.-]{0,127}$`)

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

func ruleMessage(fe validator.FieldError) string {
	switch fe.Tag() {
	case "required":
		return "is required"
	case "max":
		return "is longer than " + fe.Param()
	case "oneof":
		return "must be one of: " + fe.Param()
	case "jobtype":
		return "must match ^[a-z][a-z0-9_.-]{0,127}$"
	case "httpurl":
		return "must be an http or https URL"
	case "uuid":
		return "must be a UUID"
	case "printascii":
		return "must be printable ASCII"
	}
	return "fails rule " + fe.Tag()
}

// ValidationFailed is the 400 answer listing every failing field.
func ValidationFailed(fields []FieldError) *apierr.Error {
	return apierr.New(http.StatusBadRequest, "VALIDATION_FAILED", "The request body is invalid.",
		"Fix every field listed in context.fields and send the request again.",
		"The request schema is in /api/v1/openapi.json.").With("fields", fields)
}

// Decode reads a JSON body strictly — unknown fields and trailing data are errors — into
// dst and validates it. Decoding errors are reported as field errors too.
func Decode(body io.Reader, v *Validator, dst any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return ValidationFailed([]FieldError{decodeError(err)})
	}
	if dec.More() {
		return ValidationFailed([]FieldError{{Field: "$", Rule: "json", Message: "has data after the JSON object"}})
	}
	if fields := v.Struct(dst); len(fields) > 0 {
		return ValidationFailed(fields)
	}
	return nil
}

func decodeError(err error) FieldError {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "$"
		}
		return FieldError{Field: field, Rule: "type", Message: "must be " + jsonKind(te.Type)}
	case errors.As(err, &se):
		return FieldError{Field: "$", Rule: "json", Message: fmt.Sprintf("is not valid JSON (at byte %d)", se.Offset)}
	case errors.Is(err, io.EOF):
		return FieldError{Field: "$", Rule: "required", Message: "the body is empty"}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return FieldError{Field: strings.Trim(name, `"`), Rule: "unknown_field", Message: "is not a known field"}
	}
	return FieldError{Field: "$", Rule: "json", Message: "is not valid JSON"}
}

func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return "a JSON value"
		}
		return "an array"
	case reflect.Bool:
		return "a boolean"
	default:
		return "a number"
	}
}

// IsObject reports whether raw is a JSON object.
func IsObject(raw json.RawMessage) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{'
}
