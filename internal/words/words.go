// Package words writes counts for people: "1 run", "4,032 links".
package words

import (
	"strconv"
	"strings"
)

// Count is n and noun, the noun with an s unless n is 1, and n with a
// comma every three digits.
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return Thousands(n) + " " + noun + "s"
}

// Thousands is n with a comma every three digits: 4032 is "4,032".
func Thousands(n int) string {
	s := strconv.Itoa(n)
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return sign + s
}
