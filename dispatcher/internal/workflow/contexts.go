package workflow

import (
	"fmt"
	"strings"

	"github.com/rhysd/actionlint"
	"go.yaml.in/yaml/v4"
)

// refusedContexts are GitHub contexts that exist on GitHub but have nothing behind them
// here; actionlint accepts them, and an expression reading them would silently get empty
// values, so they are refused with what to use instead.
var refusedContexts = map[string]struct{ why, hint string }{
	"secrets": {"provider credentials stay with the platform", "remove the secret; a skill reaches its provider without one"},
	"github":  {"there is no repository or event", "read the workflow's inputs as `inputs.<name>` (not `github.event.inputs.<name>`)"},
	"runner":  {"steps are skill calls, not processes on a runner", "remove the reference"},
}

// checkContexts finds every ${{ }} expression in the file (and the bare expressions of
// jobs.<id>.if and steps[*].if) and refuses those that read a refused context or call
// hashFiles. Syntax and type errors are actionlint's to report.
func checkContexts(root *yaml.Node) []Problem {
	var out []Problem
	var walk func(n *yaml.Node, path []string)
	walk = func(n *yaml.Node, path []string) {
		switch n.Kind {
		case yaml.DocumentNode, yaml.SequenceNode:
			for _, c := range n.Content {
				walk(c, append(path, "[]"))
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				walk(n.Content[i+1], append(path, strings.ToLower(n.Content[i].Value)))
			}
		case yaml.ScalarNode:
			out = append(out, scalarExprs(n, isBareIf(path))...)
		}
	}
	if root != nil {
		walk(root, nil)
	}
	return out
}

// isBareIf: jobs.<id>.if and jobs.<id>.steps[*].if are expressions without ${{ }}.
func isBareIf(path []string) bool {
	// path starts with the document's "[]".
	n := len(path)
	return n >= 4 && path[n-1] == "if" && path[1] == "jobs" && (n == 4 || (n == 6 && path[3] == "steps"))
}

func scalarExprs(n *yaml.Node, bare bool) []Problem {
	s := n.Value
	// Where the value starts on its line: exact for plain and quoted one-line scalars; a
	// block scalar's problems point at the scalar.
	col := func(off int) (int, int) {
		if strings.Contains(s, "\n") || n.Style&(yaml.LiteralStyle|yaml.FoldedStyle) != 0 {
			return n.Line, n.Column
		}
		c := n.Column + off
		if n.Style&(yaml.DoubleQuotedStyle|yaml.SingleQuotedStyle) != 0 {
			c++
		}
		return n.Line, c
	}
	var out []Problem
	if bare && !strings.Contains(s, "${{") {
		return exprProblems(s+"}}", 0, col)
	}
	for off := 0; ; {
		i := strings.Index(s[off:], "${{")
		if i < 0 {
			return out
		}
		start := off + i + 3
		out = append(out, exprProblems(s[start:], start, col)...)
		end := strings.Index(s[start:], "}}")
		if end < 0 {
			return out
		}
		off = start + end + 2
	}
}

// exprProblems parses one expression (src runs to its closing }}) starting at byte offset
// base of the scalar.
func exprProblems(src string, base int, col func(int) (int, int)) []Problem {
	node, err := actionlint.NewExprParser().Parse(actionlint.NewExprLexer(src))
	if err != nil {
		return nil // actionlint reports it
	}
	var out []Problem
	actionlint.VisitExprNode(node, func(n, _ actionlint.ExprNode, entering bool) {
		if !entering {
			return
		}
		switch n := n.(type) {
		case *actionlint.VariableNode:
			name := strings.ToLower(n.Name)
			if r, ok := refusedContexts[name]; ok {
				line, c := col(base + n.Token().Offset)
				out = append(out, Problem{Line: line, Column: c, Rule: RuleContext,
					Message: fmt.Sprintf("the `%s` context is not available: %s", name, r.why), Hint: r.hint})
			}
		case *actionlint.FuncCallNode:
			if strings.EqualFold(n.Callee, "hashFiles") {
				line, c := col(base + n.Token().Offset)
				out = append(out, Problem{Line: line, Column: c, Rule: RuleContext,
					Message: "hashFiles() is not available: a workflow has no files",
					Hint:    "remove the hashFiles() call"})
			}
		}
	})
	return out
}
