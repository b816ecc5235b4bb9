package repocheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest function allowed outside tests and infra/.
const maxFuncLines = 80

// longFunctions are the functions still over maxFuncLines, by file and
// name. The test fails once one of them fits, so the entry goes with it.
var longFunctions = map[string]bool{}

func TestFuncLen(t *testing.T) {
	t.Parallel()
	// NoLongFunctions keeps every function of the module outside _test.go
	// files and infra/ (the CDK app, its own module) at most maxFuncLines
	// lines long, from the func keyword to the closing brace.
	t.Run("NoLongFunctions", func(t *testing.T) {
		t.Parallel()
		root := "../.."
		fset := token.NewFileSet()
		files := 0
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				switch d.Name() {
				case "infra", "node_modules", "testdata", "bin", "dist", "cdk.out":
					return filepath.SkipDir
				}
				if strings.HasPrefix(d.Name(), ".") && path != root {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			files++
			for _, decl := range f.Decls {
				fn, ok := decl.(*ast.FuncDecl)
				if !ok || fn.Body == nil {
					continue
				}
				start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
				rel, _ := filepath.Rel(root, start.Filename)
				id := filepath.ToSlash(rel) + ":" + fn.Name.Name
				n := end.Line - start.Line + 1
				switch {
				case n > maxFuncLines && !longFunctions[id]:
					t.Errorf("%s:%d: %s is %d lines long (at most %d)", rel, start.Line, fn.Name.Name, n, maxFuncLines)
				case n <= maxFuncLines && longFunctions[id]:
					t.Errorf("%s is %d lines long now: remove it from longFunctions", id, n)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		// Positive control: the walk reached the module, not an empty tree.
		if files < 100 {
			t.Fatalf("walked only %d Go files from %s", files, root)
		}
	})
}
