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
