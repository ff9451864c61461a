// Command demo-tool is the small local tool endpoint of the demo_react skill and of the
// executor's tests: a read-only weather lookup and a side-effecting create_ticket that
// honours Idempotency-Key as a real API does, with counters of every call it received and
// every ticket it created.
//
//	demo-tool [--addr 127.0.0.1:8097] [--delay 0]
//
//	GET  /weather/{city}   {"city", "temperature_c", "conditions"} (deterministic per city)
//	POST /tickets          {"title", "priority"} -> 201 {"ticket_id", ...}: a ticket is
//	                       created (the side effect). A repeated Idempotency-Key answers the
//	                       first ticket again (200) without creating another, and counts as
//	                       a duplicate request.
//	GET  /stats            {"weather": n, "tickets": requests, "executions": tickets created,
//	                       "duplicates": requests with a key seen before, "without_key": n,
//	                       "keys": {key: requests}, "executed_twice": [{"body", "executions",
//	                       "keys"}]}: executed_twice lists every body (title and priority)
//	                       for which more than one ticket was created — the same side effect
//	                       twice, under different keys or none
//	POST /stats/reset      zero the counters
//	GET  /healthz          200 ok
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

func main() {
	addr := flag.String("addr", envOr("DEMO_TOOL_ADDR", "127.0.0.1:8097"), "listen address (env DEMO_TOOL_ADDR)")
	delay := flag.Duration("delay", 0, "wait this long before answering each tool call")
	flag.Parse()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("service", "demo-tool")

	s := newServer(*delay)
	srv := &http.Server{Addr: *addr, Handler: s.routes(), ReadHeaderTimeout: 5 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	log.Info("demo tool listening", "addr", *addr)
	if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
		log.Error("listening", "addr", *addr, "error", err)
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

type ticket struct {
	ID       string `json:"ticket_id"`
	Title    string `json:"title"`
	Priority string `json:"priority"`
	Created  string `json:"created_at"`
}

type server struct {
	delay time.Duration

	mu         sync.Mutex
	weather    int
	ticketsN   int // ticket requests
	duplicates int // ticket requests whose key was seen before
	withoutKey int
	keys       map[string]int    // requests per key
	tickets    map[string]ticket // the ticket created for each key
	effects    map[string]*effect
	executions int
}

// effect is the tickets created for one body: more than one is the side effect done twice.
type effect struct {
	executions int
	keys       []string
}

// executedTwice is one entry of /stats' executed_twice.
type executedTwice struct {
	Body       string   `json:"body"`
	Executions int      `json:"executions"`
	Keys       []string `json:"keys"`
}

func newServer(delay time.Duration) *server {
	s := &server{delay: delay}
	s.reset()
	return s
}

func (s *server) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.weather, s.ticketsN, s.duplicates, s.withoutKey, s.executions = 0, 0, 0, 0, 0
	s.keys, s.tickets, s.effects = map[string]int{}, map[string]ticket{}, map[string]*effect{}
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "ok") })
	mux.HandleFunc("GET /weather/{city}", s.getWeather)
	mux.HandleFunc("POST /tickets", s.createTicket)
	mux.HandleFunc("GET /stats", s.stats)
	mux.HandleFunc("POST /stats/reset", func(w http.ResponseWriter, r *http.Request) {
		s.reset()
		s.stats(w, r)
	})
	return mux
}

func (s *server) wait(r *http.Request) {
	if s.delay > 0 {
		select {
		case <-time.After(s.delay):
		case <-r.Context().Done():
		}
	}
}

var conditions = []string{"sunny", "cloudy", "rain", "snow", "fog", "windy"}

func (s *server) getWeather(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.weather++
	s.mu.Unlock()
	s.wait(r)
	city := r.PathValue("city")
	h := fnv.New32a()
	h.Write([]byte(city))
	n := h.Sum32()
	writeJSON(w, http.StatusOK, map[string]any{"city": city, "temperature_c": int(n%40) - 5,
		"conditions": conditions[n%uint32(len(conditions))]})
}

func (s *server) createTicket(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Title    string `json:"title"`
		Priority string `json:"priority"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Title == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "body must be {\"title\": \"...\", \"priority\": \"...\"}"})
		return
	}
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	s.ticketsN++
	if key == "" {
		s.withoutKey++
	} else {
		s.keys[key]++
		if t, ok := s.tickets[key]; ok {
			s.duplicates++
			s.mu.Unlock()
			writeJSON(w, http.StatusOK, t)
			return
		}
	}
	// The side effect: a ticket is created, remembered under its key before the answer
	// (as a real API commits before it answers) so that a retry racing this request
	// gets this ticket.
	s.executions++
	t := ticket{ID: fmt.Sprintf("T-%05d", s.executions), Title: in.Title, Priority: in.Priority,
		Created: time.Now().UTC().Format(time.RFC3339)}
	if key != "" {
		s.tickets[key] = t
	}
	body, _ := json.Marshal(in)
	e := s.effects[string(body)]
	if e == nil {
		e = &effect{}
		s.effects[string(body)] = e
	}
	e.executions++
	e.keys = append(e.keys, key)
	s.mu.Unlock()
	s.wait(r)
	writeJSON(w, http.StatusCreated, t)
}

func (s *server) stats(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make(map[string]int, len(s.keys))
	for k, v := range s.keys {
		keys[k] = v
	}
	twice := []executedTwice{}
	for body, e := range s.effects {
		if e.executions > 1 {
			twice = append(twice, executedTwice{Body: body, Executions: e.executions, Keys: slices.Clone(e.keys)})
		}
	}
	slices.SortFunc(twice, func(a, b executedTwice) int { return strings.Compare(a.Body, b.Body) })
	writeJSON(w, http.StatusOK, map[string]any{"weather": s.weather, "tickets": s.ticketsN,
		"executions": s.executions, "duplicates": s.duplicates, "without_key": s.withoutKey,
		"keys": keys, "executed_twice": twice})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
