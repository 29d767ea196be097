package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"runtime"
	"sort"
	"strings"

	"rdmasweep/results"
)

func runVersion(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	v := results.Version{Version: version, Go: runtime.Version(), Arch: runtime.GOARCH}
	for name := range transports {
		v.Transports = append(v.Transports, name)
	}
	sort.Strings(v.Transports)
	if *asJSON {
		b, _ := json.Marshal(v)
		_, err := fmt.Fprintf(e.stdout, "%s\n", b)
		return err
	}
	_, err := fmt.Fprintf(e.stdout, "node %s (%s, %s/%s, transports: %s)\n", v.Version, v.Go, runtime.GOOS, v.Arch, strings.Join(v.Transports, ", "))
	return err
}
