package main

import (
	"flag"
	"io"
	"regexp"
	"strings"
	"testing"
)

// TestHelpNamesOnlyRealFlags checks that what each command's help says is
// so: every flag its usage line or its line in the runner's usage names
// exists, and its example parses with the command's own flags (a flag
// that is gone would fail both).
func TestHelpNamesOnlyRealFlags(t *testing.T) {
	flagRE := regexp.MustCompile(`(?:^|[\s\[|(])--?([a-z][a-z0-9-]*)`)
	for _, c := range commands {
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		c.flags(fs)
		for _, m := range flagRE.FindAllStringSubmatch(c.args+"\n"+c.help, -1) {
			if fs.Lookup(m[1]) == nil {
				t.Errorf("runner %s: its help names --%s, which it does not take", c.name, m[1])
			}
		}
		prefix := "runner " + c.name + " "
		if !strings.HasPrefix(c.example, prefix) {
			t.Errorf("runner %s: example %q does not start with %q", c.name, c.example, prefix)
			continue
		}
		args := strings.Fields(strings.ReplaceAll(strings.TrimPrefix(c.example, prefix), "'", ""))
		if err := fs.Parse(args); err != nil {
			t.Errorf("runner %s: example %q: %v", c.name, c.example, err)
		}
	}
}
