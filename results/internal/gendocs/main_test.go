package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestDocsAreGenerated fails when docs/plan.md or docs/csv.md differ from
// what the parameter table says: run go generate ./results.
func TestDocsAreGenerated(t *testing.T) {
	for _, s := range sections {
		path := filepath.Join("..", "..", "..", "docs", s.file)
		doc, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		want, err := replace(doc, s)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if !bytes.Equal(doc, want) {
			t.Errorf("%s is not what results/schema.go says; run: go generate ./results", path)
		}
	}
}

// TestNamesAreGenerated fails when results/param/names.go does not name
// every parameter of the table, in its order: run go generate ./results.
func TestNamesAreGenerated(t *testing.T) {
	path := filepath.Join("..", "..", "param", "names.go")
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := names()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what results/schema.go says; run: go generate ./results", path)
	}
}

func TestIdent(t *testing.T) {
	for name, want := range map[string]string{"cq_moderation": "CQModeration", "qps": "QPs", "max_rd_atomic": "MaxRdAtomic", "pkey_index": "PKeyIndex", "file": "File"} {
		if got := ident(name); got != want {
			t.Errorf("ident(%q) = %q, want %q", name, got, want)
		}
	}
}
