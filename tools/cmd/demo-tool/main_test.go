package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

type stats struct {
	Tickets       int            `json:"tickets"`
	Executions    int            `json:"executions"`
	Duplicates    int            `json:"duplicates"`
	WithoutKey    int            `json:"without_key"`
	Keys          map[string]int `json:"keys"`
	ExecutedTwice []struct {
		Body       string   `json:"body"`
		Executions int      `json:"executions"`
		Keys       []string `json:"keys"`
	} `json:"executed_twice"`
}

func post(t *testing.T, url, key, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/tickets", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out
}

func readStats(t *testing.T, url string) stats {
	t.Helper()
	resp, err := http.Get(url + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st stats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestTicketsHonourIdempotencyKeyAndCountSideEffects: a repeated key answers the first
// ticket without creating another; the same body under another key (or none) is a second
// side effect, which executed_twice names.
func TestTicketsHonourIdempotencyKeyAndCountSideEffects(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(newServer(0).routes())
	defer srv.Close()
	body := `{"title": "printer on fire", "priority": "high"}`

	status, first := post(t, srv.URL, "k1", body)
	if status != http.StatusCreated {
		t.Fatalf("first call: status %d, want 201", status)
	}
	status, again := post(t, srv.URL, "k1", body)
	if status != http.StatusOK || again["ticket_id"] != first["ticket_id"] {
		t.Fatalf("repeated key: status %d ticket %v, want 200 and the first ticket %v", status, again["ticket_id"], first["ticket_id"])
	}
	st := readStats(t, srv.URL)
	if st.Tickets != 2 || st.Executions != 1 || st.Duplicates != 1 || st.Keys["k1"] != 2 || len(st.ExecutedTwice) != 0 {
		t.Fatalf("after a repeated key: %+v, want 2 requests, 1 execution, 1 duplicate, nothing executed twice", st)
	}

	post(t, srv.URL, "k2", body)
	post(t, srv.URL, "", body)
	post(t, srv.URL, "k3", `{"title": "another one", "priority": "low"}`)
	st = readStats(t, srv.URL)
	if st.Executions != 4 || st.WithoutKey != 1 || len(st.ExecutedTwice) != 1 {
		t.Fatalf("after the same body under other keys: %+v, want 4 executions, 1 without key, 1 body executed twice", st)
	}
	if e := st.ExecutedTwice[0]; e.Executions != 3 || strings.Join(e.Keys, ",") != "k1,k2," || !strings.Contains(e.Body, "printer on fire") {
		t.Fatalf("executed_twice: %+v, want the printer ticket 3 times under k1, k2 and no key", e)
	}

	resp, err := http.Post(srv.URL+"/stats/reset", "application/json", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if st := readStats(t, srv.URL); st.Tickets != 0 || st.Executions != 0 || len(st.ExecutedTwice) != 0 || len(st.Keys) != 0 {
		t.Fatalf("after reset: %+v", st)
	}
}
