package tier

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/switchyard-ai/switchyard/shared/apierr"
)

// TestPermanentCodesArePermanent reads the executor's source for every call of Permanent
// and checks that its code is an apierr constant that shared/apierr marks permanent: the
// attribute is stated once, in codes.go, and the executor must not call a code permanent
// that the table says a retry can fix.
func TestPermanentCodesArePermanent(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	// The constants' values, read from the table's source.
	codesFile, err := parser.ParseFile(fset, filepath.Join("..", "..", "..", "shared", "apierr", "codes.go"), nil, 0)
	require.NoError(t, err)
	values := map[string]string{}
	ast.Inspect(codesFile, func(n ast.Node) bool {
		if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Values) == 1 {
			if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				values[vs.Names[0].Name], _ = strconv.Unquote(lit.Value)
			}
		}
		return true
	})

	calls := 0
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) == 0 {
				return true
			}
			name := ""
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				name = fn.Name
			case *ast.SelectorExpr:
				if x, ok := fn.X.(*ast.Ident); ok && x.Name == "tier" {
					name = fn.Sel.Name
				}
			}
			if name != "Permanent" {
				return true
			}
			calls++
			pos := fset.Position(call.Pos())
			sel, ok := call.Args[0].(*ast.SelectorExpr)
			require.True(t, ok, "%s: Permanent's code is not an apierr constant", pos)
			code, ok := values[sel.Sel.Name]
			require.True(t, ok, "%s: %s is not a constant of shared/apierr/codes.go", pos, sel.Sel.Name)
			require.True(t, apierr.Permanent(code), "%s: %s is not marked permanent in shared/apierr/codes.go", pos, code)
			return true
		})
		return nil
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, calls, 4, "the walk found the calls")
}
