package sim

import (
	"cmp"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	openai "github.com/sashabaranov/go-openai"
)

// maxBodyBytes bounds a request body; real prompts with tool definitions stay far below.
const maxBodyBytes = 32 << 20

// routes uses the standard library mux rather than echo: the simulator answers in
// OpenAI's error format, not the platform's apierr body that the echo error handler
// writes, and streams SSE, which plain net/http does with no adapter.
//
// Authorization is accepted and ignored, so any client configured with any API key works.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/chat/completions", s.handle(s.chatCompletions))
	mux.Handle("GET /v1/models", s.handle(s.listModels))
	mux.Handle("GET /v1/models/{model}", s.handle(s.getModel))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.Handle("GET /sim/stats", s.handle(func(w http.ResponseWriter, _ *http.Request) error {
		return writeJSON(w, http.StatusOK, s.Stats())
	}))
	mux.Handle("POST /sim/reset", s.handle(func(w http.ResponseWriter, _ *http.Request) error {
		s.Reset()
		s.log.Info("counters and limits reset")
		return writeJSON(w, http.StatusOK, s.Stats())
	}))
	mux.Handle("GET /sim/repeats", s.handle(func(w http.ResponseWriter, _ *http.Request) error {
		return writeJSON(w, http.StatusOK, s.Repeats())
	}))
	mux.Handle("GET /sim/faults", s.handle(func(w http.ResponseWriter, _ *http.Request) error {
		return writeJSON(w, http.StatusOK, s.bursts.state())
	}))
	mux.Handle("POST /sim/faults", s.handle(s.startBurst))
	mux.Handle("GET /sim/scripts", s.handle(s.listScripts))
	mux.Handle("POST /sim/scripts", s.handle(s.postScript))
	mux.Handle("GET /sim/scripts/{name}", s.handle(s.getScript))
	mux.Handle("DELETE /sim/scripts/{name}", s.handle(s.deleteScript))
	mux.Handle("DELETE /sim/faults", s.handle(func(w http.ResponseWriter, _ *http.Request) error {
		s.StopBurst()
		s.log.Info("burst stopped")
		return writeJSON(w, http.StatusOK, s.bursts.state())
	}))
	return mux
}

// handle is the one place that turns a handler's error into a response and a log line.
func (s *Server) handle(h func(http.ResponseWriter, *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		var ae *apiError
		if !errors.As(err, &ae) {
			s.log.Error("request failed", "path", r.URL.Path, "err", err)
			ae = &apiError{status: http.StatusInternalServerError, message: "internal simulator error", typ: "server_error"}
		}
		switch {
		case ae.status == http.StatusTooManyRequests || ae.status >= 500:
			// Refusals and injected faults are the simulation doing its job, thousands
			// per second in a benchmark: not worth a line each unless debugging.
			s.log.Debug("request refused", "path", r.URL.Path, "status", ae.status, "type", ae.typ)
		default:
			s.bad.Add(1)
			s.log.Warn("bad request", "path", r.URL.Path, "status", ae.status, "param", ae.param, "message", ae.message)
		}
		if werr := writeError(w, ae); werr != nil {
			s.log.Debug("writing error response", "err", werr)
		}
	})
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) error {
	var req openai.ChatCompletionRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxBodyBytes)).Decode(&req); err != nil {
		return badRequest("", "We could not parse the JSON body of your request: "+err.Error())
	}
	ms := s.models[req.Model]
	if ms == nil {
		if req.Model == "" {
			return badRequest("model", "you must provide a model parameter")
		}
		return modelNotFound(req.Model)
	}
	if len(req.Messages) == 0 {
		return badRequest("messages", "messages must be a non-empty array")
	}
	if req.N > 1 {
		return badRequest("n", "sim-llm answers with one choice only: n must be 1")
	}
	a, err := respond(&ms.model, &req, s.cfg.Seed)
	if err != nil {
		var re *requestError
		if errors.As(err, &re) {
			return badRequest(re.param, re.message)
		}
		return err
	}

	t := tally{m: &ms.stats, t: &s.total}
	// A burst is an outage in front of the model: it answers before the limits, which it
	// does not charge, and before any script, whose answers it leaves unused.
	if status, left, ok := s.bursts.take(req.Model); ok {
		t.request()
		if status == http.StatusTooManyRequests {
			t.refused()
		} else {
			t.errored()
		}
		return burstError(w.Header(), status, left)
	}
	var latency *time.Duration
	pick, scripted := s.scripted(r.Header, &req)
	if scripted {
		if pick.err != nil {
			return pick.err // a test's mistake (no such script, exhausted): a 400
		}
		if sa := pick.answer; sa != nil {
			latency = sa.latency
			if sa.kind == "error" {
				return s.scriptedError(r, w, t, sa)
			}
			a = sa.build(&req, a)
		}
	}
	t.request()
	// TPM is charged at admission with prompt tokens plus max_tokens when the client set
	// it (as OpenAI reserves), else plus the answer's actual length, which the simulator
	// knows in advance. Nothing is refunded afterwards.
	charge := a.promptTokens + a.completionTokens()
	if limit := cmp.Or(req.MaxCompletionTokens, req.MaxTokens); limit > 0 {
		charge = a.promptTokens + limit
	}
	d := ms.limits.admit(req.Model, charge)
	d.setHeaders(w.Header())
	if !d.ok {
		t.refused()
		return rateLimited(d)
	}
	if ms.cfg.ErrorRate > 0 && timingRand.Float64() < ms.cfg.ErrorRate {
		t.errored()
		status := http.StatusInternalServerError
		if timingRand.IntN(2) == 0 {
			status = http.StatusServiceUnavailable
		}
		return injectedFault(status)
	}

	t.enter()
	defer t.leave()
	wait := s.latency(ms, latency)
	id := "chatcmpl-sim" + strconv.FormatUint(timingRand.Uint64(), 36)
	if req.Stream {
		includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		if s.stream(r, w, streamPlan{id: id, model: req.Model, a: a, latency: wait, ttft: ms.cfg.TTFTFraction, includeUsage: includeUsage}) {
			t.served(a, true)
			s.servedRepeat(a, &req)
			pick.served()
		} else {
			t.cancelled()
		}
		return nil
	}
	if !waitFor(r.Context(), wait) {
		t.cancelled()
		return nil
	}
	resp := openai.ChatCompletionResponse{
		ID:                id,
		Object:            "chat.completion",
		Created:           time.Now().Unix(),
		Model:             req.Model,
		Choices:           []openai.ChatCompletionChoice{{Index: 0, Message: a.message(), FinishReason: a.finish}},
		Usage:             a.usage(),
		SystemFingerprint: systemFingerprint,
	}
	if err := writeJSON(w, http.StatusOK, resp); err != nil {
		t.cancelled()
		return nil
	}
	t.served(a, false)
	s.servedRepeat(a, &req)
	pick.served()
	return nil
}

// latency is the time-scaled wait of one answer: a script's, else a draw from the model.
func (s *Server) latency(ms *modelState, scripted *time.Duration) time.Duration {
	if scripted != nil {
		return time.Duration(float64(*scripted) * s.cfg.TimeScale)
	}
	return LatencyDuration(ms.latency.Sample(timingRand), s.cfg.TimeScale)
}

// scriptedError answers a script's error after its latency. 429 and 5xx count as the
// model's refused and failed requests; other statuses, like every 4xx, as bad requests.
func (s *Server) scriptedError(r *http.Request, w http.ResponseWriter, t tally, sa *scriptedAnswer) error {
	counted := sa.err.status == http.StatusTooManyRequests || sa.err.status >= 500
	if counted {
		t.request()
	}
	var wait time.Duration
	if sa.latency != nil {
		wait = time.Duration(float64(*sa.latency) * s.cfg.TimeScale)
	}
	if !waitFor(r.Context(), wait) {
		if counted {
			t.cancelled()
		}
		return nil
	}
	switch {
	case !counted:
	case sa.err.status == http.StatusTooManyRequests:
		t.refused()
	default:
		t.errored()
	}
	if sa.retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(math.Ceil(sa.retryAfter.Seconds())))))
		w.Header().Set("retry-after-ms", strconv.FormatInt(sa.retryAfter.Milliseconds(), 10))
	}
	e := *sa.err
	return &e
}

// servedRepeat records an answer served when repeats are tracked.
func (s *Server) servedRepeat(a answer, req *openai.ChatCompletionRequest) {
	if s.repeats != nil {
		s.repeats.served(a.digest, req.Messages)
	}
}

// systemFingerprint marks every answer as simulated.
const systemFingerprint = "sim-llm"

func (a answer) message() openai.ChatCompletionMessage {
	m := openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant}
	if len(a.toolCalls) > 0 {
		m.ToolCalls = a.toolCalls
	} else {
		m.Content = a.content()
	}
	return m
}

func (a answer) usage() openai.Usage {
	return openai.Usage{
		PromptTokens:        a.promptTokens,
		CompletionTokens:    a.completionTokens(),
		TotalTokens:         a.promptTokens + a.completionTokens(),
		PromptTokensDetails: &openai.PromptTokensDetails{CachedTokens: 0},
	}
}

// modelList is OpenAI's list envelope; go-openai's ModelsList lacks the "object" field.
type modelList struct {
	Object string         `json:"object"`
	Data   []openai.Model `json:"data"`
}

func (s *Server) modelInfo(name string) openai.Model {
	return openai.Model{ID: name, Object: "model", CreatedAt: s.created, OwnedBy: "sim-llm", Root: name}
}

func (s *Server) listModels(w http.ResponseWriter, _ *http.Request) error {
	l := modelList{Object: "list", Data: make([]openai.Model, 0, len(s.names))}
	for _, n := range s.names {
		l.Data = append(l.Data, s.modelInfo(n))
	}
	return writeJSON(w, http.StatusOK, l)
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("model")
	if s.models[name] == nil {
		return modelNotFound(name)
	}
	return writeJSON(w, http.StatusOK, s.modelInfo(name))
}
