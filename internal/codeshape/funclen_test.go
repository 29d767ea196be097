// Package codeshape holds tests of the shape of the module's own source,
// read from the files: rules a reviewer would otherwise have to hold.
package codeshape

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the most lines a non-test function may span, from its
// func keyword to its closing brace: what a reader can hold at once.
const maxFuncLines = 100

// flatTables are the functions allowed beyond maxFuncLines, each a flat
// table or switch that reads as data, with the reason. Name them as
// funcName reports them.
var flatTables = map[string]string{}

// TestFunctionLength fails for every non-test function of the module over
// maxFuncLines lines that flatTables does not name, and for an entry of
// flatTables that names no such function (a table that shrank, moved or
// went leaves no stale excuse behind).
func TestFunctionLength(t *testing.T) {
	root := moduleRoot(t)
	long := map[string]int{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1; n > maxFuncLines {
				long[funcName(filepath.ToSlash(rel), fd)] = n
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name := range long {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if _, ok := flatTables[name]; !ok {
			t.Errorf("%s is %d lines, more than %d: split it into named steps (or, if it is a flat table or switch that reads as data, add it to flatTables with the reason)", name, long[name], maxFuncLines)
		}
	}
	for name := range flatTables {
		if _, ok := long[name]; !ok {
			t.Errorf("flatTables names %s, which is not a function over %d lines: remove the entry", name, maxFuncLines)
		}
	}
}

// funcName is dir.Func or dir.Recv.Method, dir relative to the module
// root, e.g. "runner/hosts/remote.SSH.Upload".
func funcName(dir string, fd *ast.FuncDecl) string {
	name := fd.Name.Name
	if fd.Recv != nil && len(fd.Recv.List) > 0 {
		typ := fd.Recv.List[0].Type
		if star, ok := typ.(*ast.StarExpr); ok {
			typ = star.X
		}
		if idx, ok := typ.(*ast.IndexExpr); ok { // a generic receiver
			typ = idx.X
		}
		if idx, ok := typ.(*ast.IndexListExpr); ok {
			typ = idx.X
		}
		if id, ok := typ.(*ast.Ident); ok {
			name = id.Name + "." + name
		}
	}
	return fmt.Sprintf("%s.%s", dir, name)
}

// moduleRoot is the directory above this one that holds go.mod.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
