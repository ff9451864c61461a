package apierr_test

import (
	"bufio"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// docRow is one row of a code table of docs/errors.md.
type docRow struct {
	code, http, where string
	run               bool // in the run errors' table
}

var codeRow = regexp.MustCompile("^\\| `([A-Z0-9_]+)` \\|")

// readDoc returns the rows of docs/errors.md's code tables: the answers' table (code, HTTP,
// where) and, after the "Run errors" heading, the run errors' table (code only).
func readDoc(t *testing.T, path string) []docRow {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var rows []docRow
	run := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			run = strings.Contains(strings.ToLower(line), "run errors")
		}
		m := codeRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		cells := strings.Split(line, "|")
		r := docRow{code: m[1], run: run}
		if !run && len(cells) > 3 {
			r.http, r.where = strings.TrimSpace(cells[2]), strings.TrimSpace(cells[3])
		}
		rows = append(rows, r)
	}
	require.NoError(t, sc.Err())
	return rows
}

// whereOf reads the "where" cell: "all", or service names separated by commas.
func whereOf(cell string) (apierr.Where, error) {
	var w apierr.Where
	for part := range strings.SplitSeq(cell, ",") {
		switch strings.TrimSpace(part) {
		case "all":
			w |= apierr.Services
		case "dispatcher":
			w |= apierr.Dispatcher
		case "router":
			w |= apierr.Router
		case "client":
			w |= apierr.Client
		default:
			return 0, fmt.Errorf("unknown service %q", part)
		}
	}
	return w, nil
}

// checkDoc returns what the rows get wrong against the code table.
func checkDoc(rows []docRow, specs []apierr.Spec) []string {
	var problems []string
	byCode := map[string]apierr.Spec{}
	for _, s := range specs {
		byCode[s.Code] = s
	}
	answers, runs := map[string]bool{}, map[string]bool{}
	for _, r := range rows {
		s, ok := byCode[r.code]
		if !ok {
			problems = append(problems, r.code+": documented but not a constant in shared/apierr/codes.go")
			continue
		}
		if r.run {
			runs[r.code] = true
			continue
		}
		answers[r.code] = true
		if n, err := strconv.Atoi(r.http); err == nil && n != s.Status || err != nil && s.Status != 0 {
			problems = append(problems, fmt.Sprintf("%s: HTTP %q in the doc, %d in codes.go", r.code, r.http, s.Status))
		}
		w, err := whereOf(r.where)
		if err != nil || w != s.Where&(apierr.Services|apierr.Client) {
			problems = append(problems, fmt.Sprintf("%s: where %q in the doc, %b in codes.go", r.code, r.where, s.Where))
		}
	}
	for _, s := range specs {
		if s.Where&(apierr.Services|apierr.Client) != 0 && !answers[s.Code] {
			problems = append(problems, s.Code+": missing from the doc's table of answers")
		}
		if s.Where&apierr.Run != 0 && !runs[s.Code] {
			problems = append(problems, s.Code+": missing from the doc's table of run errors")
		}
	}
	return problems
}

func TestDocsListEveryCode(t *testing.T) {
	t.Parallel()
	rows := readDoc(t, "../../docs/errors.md")
	require.NotEmpty(t, rows)
	require.Empty(t, checkDoc(rows, apierr.Codes()), "docs/errors.md and shared/apierr/codes.go disagree")
}

func TestCheckDocCatchesDrift(t *testing.T) {
	t.Parallel()
	specs := []apierr.Spec{
		{Code: "A_CODE", Status: 404, Where: apierr.Dispatcher},
		{Code: "B_CODE", Where: apierr.Run},
	}
	ok := []docRow{{code: "A_CODE", http: "404", where: "dispatcher"}, {code: "B_CODE", run: true}}
	require.Empty(t, checkDoc(ok, specs))

	require.Len(t, checkDoc(ok[:1], specs), 1, "a run code missing from the doc")
	require.Len(t, checkDoc(ok[1:], specs), 1, "an answer missing from the doc")
	require.Len(t, checkDoc(append(slices.Clone(ok), docRow{code: "GONE", run: true}), specs), 1,
		"a documented code that does not exist")
	require.Len(t, checkDoc([]docRow{{code: "A_CODE", http: "400", where: "dispatcher"}, ok[1]}, specs), 1,
		"a wrong status")
	require.Len(t, checkDoc([]docRow{{code: "A_CODE", http: "404", where: "router"}, ok[1]}, specs), 1,
		"a wrong service")
}

func TestCodesAreUniqueUpperSnake(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	upperSnake := regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)
	for _, s := range apierr.Codes() {
		require.Regexp(t, upperSnake, s.Code)
		require.False(t, seen[s.Code], "%s is listed twice", s.Code)
		seen[s.Code] = true
		require.NotZero(t, s.Where, "%s is answered or recorded nowhere", s.Code)
		if s.Where&apierr.Services == 0 {
			require.Zero(t, s.Status, "%s is no service's answer but has an HTTP status", s.Code)
		}
	}
	require.Len(t, slices.Collect(maps.Keys(seen)), len(apierr.Codes()))
}

func TestPermanent(t *testing.T) {
	t.Parallel()
	require.True(t, apierr.Permanent(apierr.CodeBudgetExceeded))
	require.False(t, apierr.Permanent(apierr.CodeRateLimitWait))
	require.False(t, apierr.Permanent("NOT_A_CODE"))
	s, ok := apierr.Lookup(apierr.CodeBacklogFull)
	require.True(t, ok)
	require.Equal(t, 429, s.Status)
}
