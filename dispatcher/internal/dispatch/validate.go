package dispatch

import (
	"bytes"
	"context"
	"strings"

	"github.com/switchyard-ai/switchyard/shared/payload"
)

// checkRequest refuses, before anything is charged or written, a request whose job could
// not run: a payload that is not the shape its skill's execution type takes
// (shared/payload, the same check the executor makes), and text PostgreSQL cannot store (a
// NUL character). Bodies of the HTTP API have passed Decode, which checks every string of
// the body; checking again here covers callers that build a Request themselves, and costs
// a scan for six bytes.
//
// A skill that cannot be resolved is left to Dispatch, which answers for it.
func (s *Service) checkRequest(ctx context.Context, orgID string, req Request) error {
	var fields []FieldError
	texts := []struct{ field, value string }{
		{"job_type", req.JobType}, {"user_id", req.UserID}, {"callback_url", req.CallbackURL},
		{"idempotency_key", req.IdempotencyKey},
	}
	if m := req.Metadata; m != nil {
		texts = append(texts, []struct{ field, value string }{{"metadata.source_service", m.SourceService},
			{"metadata.correlation_id", m.CorrelationID}, {"metadata.parent_job_id", m.ParentJobID}}...)
	}
	for _, t := range texts {
		if strings.IndexByte(t.value, 0) >= 0 {
			fields = append(fields, FieldError{Field: t.field, Rule: "nul",
				Message: `must not contain the NUL character (\u0000), which cannot be stored`})
		}
	}
	if !IsObject(req.Payload) {
		fields = append(fields, FieldError{Field: "payload", Rule: "type", Message: "must be an object"})
		return ValidationFailed(fields)
	}
	if bytes.Contains(req.Payload, nulEscape) {
		for _, f := range walkBody(req.Payload) {
			if f.Field == "$" {
				f.Field = "payload"
			} else {
				f.Field = "payload." + f.Field
			}
			fields = append(fields, f)
		}
	}
	if sk, _, err := s.Registry.Skill(ctx, orgID, req.JobType); err == nil && sk.Enabled {
		for _, p := range payload.Check(sk.ExecutionType, req.Payload) {
			fields = append(fields, FieldError{Field: p.Field(), Rule: p.Rule, Message: p.Message})
		}
	}
	if len(fields) > 0 {
		return ValidationFailed(fields)
	}
	return nil
}
