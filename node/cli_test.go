package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

// TestCLIIsTheTableAlone holds node's house: cli.go is the command table
// and declares nothing else, so no file of the package can use a name of
// it; what the commands share lives in env.go, main.go and node/session.
func TestCLIIsTheTableAlone(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "cli.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Name.Name != "init" || d.Recv != nil {
				t.Errorf("cli.go declares func %s; it holds the command table alone", d.Name.Name)
			}
		case *ast.GenDecl:
			if d.Tok != token.IMPORT {
				t.Errorf("cli.go declares a %s; it holds the command table alone", d.Tok)
			}
		}
	}
}
