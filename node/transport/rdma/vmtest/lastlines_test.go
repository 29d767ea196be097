package vmtest

import "strings"

// lastLines returns the last n lines of s, to keep a failure's output
// (a runner's stderr, the guest's console) to what explains it.
func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}
