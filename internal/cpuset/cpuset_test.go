package cpuset

import (
	"strings"
	"testing"
)

func TestParseAndString(t *testing.T) {
	for in, want := range map[string]string{
		"0":          "0",
		"0-3,8":      "0-3,8",
		" 8,0-3\n":   "0-3,8",
		"2,2":        "2",
		"1,3,2,7":    "1-3,7",
		"0-1,2-3":    "0-3",
		"8191":       "8191",
		"0, 4 ,5-6 ": "0,4-6",
	} {
		s, err := Parse(in)
		if err != nil || s.String() != want {
			t.Errorf("Parse(%q) = %v, %v; want %s", in, s, err, want)
		}
	}
	for in, part := range map[string]string{
		"":      "empty",
		"  \n":  "empty",
		"3-1":   `"3-1" is not a CPU`,
		"a":     `"a" is not a CPU`,
		"0,,1":  `"" is not a CPU`,
		"-1":    `"-1" is not a CPU`,
		"8192":  "ids 0 to 8191",
		"0-1-2": `"0-1-2" is not a CPU`,
	} {
		if s, err := Parse(in); err == nil || !strings.Contains(err.Error(), part) {
			t.Errorf("Parse(%q) = %v, %v; want an error containing %q", in, s, err, part)
		}
	}
}
