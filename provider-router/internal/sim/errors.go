package sim

import (
	"encoding/json"
	"net/http"
)

// apiError is an answer in OpenAI's error format. sim-llm stands in for an OpenAI
// upstream, so it speaks OpenAI's error body rather than Switchyard's own: the router's
// adapter must be tested against what the real provider sends.
type apiError struct {
	status  int
	message string
	typ     string // invalid_request_error, requests, tokens, server_error
	param   string // empty: null
	code    string // empty: null
}

func (e *apiError) Error() string { return e.message }

// errorBody is {"error":{"message","type","param","code"}} with param and code always
// present, null when unset, as OpenAI sends them.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func badRequest(param, message string) *apiError {
	return &apiError{status: http.StatusBadRequest, message: message, typ: "invalid_request_error", param: param}
}

func modelNotFound(name string) *apiError {
	return &apiError{
		status:  http.StatusNotFound,
		message: "The model `" + name + "` does not exist or you do not have access to it.",
		typ:     "invalid_request_error",
		param:   "model",
		code:    "model_not_found",
	}
}

func rateLimited(d decision) *apiError {
	return &apiError{status: http.StatusTooManyRequests, message: d.message, typ: d.kind, code: "rate_limit_exceeded"}
}

func injectedFault(status int) *apiError {
	msg := "The server had an error while processing your request. Sorry about that! (sim-llm injected fault)"
	if status == http.StatusServiceUnavailable {
		msg = "The server is overloaded or not ready yet. (sim-llm injected fault)"
	}
	return &apiError{status: status, message: msg, typ: "server_error"}
}

func writeJSON(w http.ResponseWriter, status int, v any) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) error {
	return writeJSON(w, e.status, errorBody{Error: errorDetail{
		Message: e.message,
		Type:    e.typ,
		Param:   nullable(e.param),
		Code:    nullable(e.code),
	}})
}
