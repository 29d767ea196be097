package plan

import (
	"errors"
	"testing"
)

// TestSyntaxErrorLines pins the line yaml.v3's syntax errors are reported
// at: its parser errors count lines from 0 and its scanner errors from 1,
// and it leaves the line out on the first line.
func TestSyntaxErrorLines(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		line int
	}{
		{"a: 1\nb: {c: 2\nd: 3\n", 2},   // unclosed flow mapping opened on line 2
		{"a: 1\nb: [1\n", 2},            // unclosed flow sequence
		{"a: 1\nb: c: d\n", 2},          // scanner: mapping values not allowed
		{"a: 1\n\tb: 2\n", 2},           // scanner: tab
		{"a: 1\nb: 'x\n", 2},            // scanner: unterminated quote
		{"a: b: c\n", 1},                // scanner, first line: no line in yaml.v3's text
		{"a:\n  - 1\n  b: 2\n", 2},      // block sequence that starts on line 2
		{"x: 1\ny: 2\nz: [\n  1,\n", 4}, // at EOF: the last line
	} {
		_, err := Parse("s.yaml", []byte(tc.yaml), Options{})
		var list ErrorList
		if !errors.As(err, &list) || len(list) != 1 {
			t.Errorf("%q: got %v, want one syntax error", tc.yaml, err)
			continue
		}
		if list[0].Line != tc.line {
			t.Errorf("%q: error %q at line %d, want line %d", tc.yaml, list[0], list[0].Line, tc.line)
		}
	}
}

func TestLineCount(t *testing.T) {
	for in, want := range map[string]int{
		"": 0, "a": 1, "a\n": 1, "a\nb": 2, "a\r\nb\r\n": 2, "a\rb": 2, "a\r\r\n": 2,
		"a\u0085b": 2, "a\u2028b\u2029": 2, "\n\n": 2,
	} {
		if got := lineCount([]byte(in)); got != want {
			t.Errorf("lineCount(%q) = %d, want %d", in, got, want)
		}
	}
}
