package chain

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/switchyard-ai/switchyard/runstore"
)

// TestDecodeOncePerChainAndDefinition: a chain's transitions decode its definition and
// Rules once; a stored definition that differs, or a chain that ended, is decoded again; a
// definition that does not decode is never kept.
func TestDecodeOncePerChainAndDefinition(t *testing.T) {
	t.Parallel()
	calls := 0
	c := &Coordinator{Rules: func(*Definition) (Rules, error) { calls++; return &fakeRules{}, nil }}
	wf := func(jobType string) runstore.Chain {
		return runstore.Chain{ID: "c1", Definition: []byte(`{"on_failure":"continue","workflow":{"plan":1},` +
			`"steps":[{"step_id":"j/s","job_type":"` + jobType + `","job":"j"}]}`)}
	}
	def, rules, err := c.decode(wf("a"))
	if err != nil || rules == nil || def.Steps[0].JobType != "a" || calls != 1 {
		t.Fatalf("first decode: %v, %v, %v, %d Rules calls", def, rules, err, calls)
	}
	again, rulesAgain, err := c.decode(wf("a"))
	if err != nil || again != def || rulesAgain != rules || calls != 1 {
		t.Fatalf("the same chain and bytes decoded again (%d Rules calls, same def %v)", calls, again == def)
	}
	changed, _, err := c.decode(wf("b"))
	if err != nil || changed.Steps[0].JobType != "b" || calls != 2 {
		t.Fatalf("a changed definition: %v, %v, %d Rules calls", changed, err, calls)
	}
	other := wf("b")
	other.ID = "c2"
	if _, _, err := c.decode(other); err != nil || calls != 3 {
		t.Fatalf("another chain shares an entry: %v, %d Rules calls", err, calls)
	}
	c.forget("c1")
	if _, _, err := c.decode(wf("b")); err != nil || calls != 4 {
		t.Fatalf("an ended chain's entry kept: %v, %d Rules calls", err, calls)
	}

	plain := runstore.Chain{ID: "c3", Definition: []byte(`{"steps":[{"step_id":"s1","job_type":"a"}]}`)}
	if def, rules, err := c.decode(plain); err != nil || rules != nil || def.OnFailure != "abort" || calls != 4 {
		t.Fatalf("a chain skill's definition: %v, %v, %v, %d Rules calls", def, rules, err, calls)
	}

	bad := runstore.Chain{ID: "c4", Definition: []byte(`{"steps":[]}`)}
	for range 2 {
		if _, _, err := c.decode(bad); !errors.Is(err, errUnreadable) {
			t.Fatalf("an unreadable definition: %v", err)
		}
	}
	failing := &Coordinator{Rules: func(*Definition) (Rules, error) { calls++; return nil, errors.New("no plan") }}
	for range 2 {
		if _, _, err := failing.decode(wf("a")); !errors.Is(err, errUnreadable) {
			t.Fatalf("a plan that does not decode: %v", err)
		}
	}
	if calls != 6 {
		t.Fatalf("a plan that did not decode was kept: %d Rules calls", calls)
	}
	if _, _, err := (&Coordinator{}).decode(wf("a")); !errors.Is(err, errUnreadable) {
		t.Fatalf("a workflow without workflow rules: %v", err)
	}
}

// BenchmarkDecodeCached: a transition's decode once its chain's entry is kept, for a
// definition of 200 steps and a 100 KB plan (the stored size of a 200-job workflow; its
// decoding is BenchmarkDecode200Jobs in package workflow). The stored bytes are read anew
// by each transition, so they are compared, not the same slice.
func BenchmarkDecodeCached(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"on_failure":"continue","workflow":{"plan":"` + strings.Repeat("x", 100_000) + `"},"steps":[`)
	for i := range 200 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"step_id":"j%d/s","job_type":"demo_llm","job":"j%d"}`, i, i)
	}
	sb.WriteString(`]}`)
	c := &Coordinator{Rules: func(*Definition) (Rules, error) { return &fakeRules{}, nil }}
	ch := runstore.Chain{ID: "c1", Definition: []byte(sb.String())}
	if _, _, err := c.decode(ch); err != nil {
		b.Fatal(err)
	}
	ch.Definition = bytes.Clone(ch.Definition)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := c.decode(ch); err != nil {
			b.Fatal(err)
		}
	}
}
