package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestFilesLayered holds package main's files to their layers: main.go on
// top (the command table and dispatch), each cmd_NAME.go under it, and the
// helpers every command shares (cli.go, planflags.go, csvread.go) at the
// bottom. A command file uses no name another command file declares, and a
// shared file uses no command's: either would run back up, or across.
func TestFilesLayered(t *testing.T) {
	uses := fileUses(t, ".")
	if len(uses) < 5 {
		t.Fatalf("found uses in only %d files; the scan is broken", len(uses))
	}
	for from, tos := range uses {
		for to, names := range tos {
			fromCmd, toCmd := strings.HasPrefix(from, "cmd_"), strings.HasPrefix(to, "cmd_")
			switch {
			case to == "main.go":
				t.Errorf("%s uses %s from main.go: main.go is the top, which nothing else uses", from, strings.Join(names, ", "))
			case fromCmd && toCmd:
				t.Errorf("%s uses %s from %s: a command file uses no other command's names", from, strings.Join(names, ", "), to)
			case !fromCmd && from != "main.go" && toCmd:
				t.Errorf("%s uses %s from %s: a shared file uses no command's names", from, strings.Join(names, ", "), to)
			}
		}
	}
}

// fileUses maps each non-test file of the package in dir to the files whose
// top-level names it uses, and those names.
func fileUses(t *testing.T, dir string) map[string]map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	declared := map[string]string{} // top-level name → its file
	parsed := map[string]*ast.File{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		parsed[name] = af
		for _, n := range topLevel(af) {
			declared[n] = name
		}
	}
	uses := map[string]map[string][]string{}
	for name, af := range parsed {
		seen := map[string]bool{}
		var visit func(n ast.Node) bool
		visit = func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				ast.Inspect(n.X, visit)
				return false // n.Sel is a field, a method or another package's name
			case *ast.KeyValueExpr:
				if _, isIdent := n.Key.(*ast.Ident); isIdent {
					ast.Inspect(n.Value, visit)
					return false // a struct literal's field name
				}
			case *ast.Field:
				ast.Inspect(n.Type, visit)
				return false // the field's own names
			case *ast.Ident:
				// The parser resolves what the file itself declares (its
				// locals, its own top-level names); what it leaves
				// unresolved is another file's, or the universe's.
				to, ok := declared[n.Name]
				if !ok || to == name || n.Obj != nil || seen[n.Name] {
					return true
				}
				seen[n.Name] = true
				if uses[name] == nil {
					uses[name] = map[string][]string{}
				}
				uses[name][to] = append(uses[name][to], n.Name)
			}
			return true
		}
		for _, d := range af.Decls { // not the package clause's name
			ast.Inspect(d, visit)
		}
	}
	for _, tos := range uses {
		for to := range tos {
			sort.Strings(tos[to])
		}
	}
	return uses
}

// topLevel are the names a file declares at package level: functions
// (not methods), types, variables and constants.
func topLevel(af *ast.File) []string {
	var names []string
	for _, d := range af.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				names = append(names, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					names = append(names, s.Name.Name)
				case *ast.ValueSpec:
					for _, n := range s.Names {
						names = append(names, n.Name)
					}
				}
			}
		}
	}
	return names
}
