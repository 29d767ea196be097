// Command gendocs writes what comes from the parameter table in
// results/schema.go: the parameter reference in docs/plan.md and the column
// list in docs/csv.md, each between its markers, leaving the prose around
// them alone; and results/param/names.go, the parameters' Go constants.
// go generate ./results runs it; TestDocsAreGenerated and
// TestNamesAreGenerated fail when the checked-in files differ from what it
// would write.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"rdmasweep/results"
)

func main() {
	docs := flag.String("docs", "docs", "the docs `DIR`")
	namesFile := flag.String("names", "", "write the parameters' constants to `FILE` (results/param/names.go)")
	flag.Parse()
	if *namesFile != "" {
		if err := writeNames(*namesFile); err != nil {
			fmt.Fprintln(os.Stderr, "gendocs:", err)
			os.Exit(1)
		}
	}
	for _, s := range sections {
		path := filepath.Join(*docs, s.file)
		old, err := os.ReadFile(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "gendocs:", err)
			os.Exit(1)
		}
		updated, err := replace(old, s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gendocs: %s: %v\n", path, err)
			os.Exit(1)
		}
		if !bytes.Equal(old, updated) {
			if err := os.WriteFile(path, updated, 0o644); err != nil {
				fmt.Fprintln(os.Stderr, "gendocs:", err)
				os.Exit(1)
			}
			fmt.Fprintf(os.Stderr, "gendocs: wrote %s\n", path)
		}
	}
}

// writeNames writes names.go to path when it differs.
func writeNames(path string) error {
	want, err := names()
	if err != nil {
		return err
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, want) {
		return nil
	}
	if err := os.WriteFile(path, want, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "gendocs: wrote %s\n", path)
	return nil
}

// section is one generated part of a doc file.
type section struct {
	file, name string
	render     func() string
}

var sections = []section{
	{"plan.md", "parameters", parameters},
	{"csv.md", "columns", columns},
}

func markers(name string) (begin, end string) {
	return "<!-- generated: " + name + " (go generate ./results); edit results/schema.go, not this table -->\n",
		"<!-- end generated: " + name + " -->\n"
}

// replace puts s's rendering between its markers in doc.
func replace(doc []byte, s section) ([]byte, error) {
	begin, end := markers(s.name)
	i := bytes.Index(doc, []byte(begin))
	j := bytes.Index(doc, []byte(end))
	if i < 0 || j < i {
		return nil, fmt.Errorf("no %q … %q markers", strings.TrimSpace(begin), strings.TrimSpace(end))
	}
	var b bytes.Buffer
	b.Write(doc[:i+len(begin)])
	b.WriteString(s.render())
	b.Write(doc[j:])
	return b.Bytes(), nil
}

var sectionTitles = map[string]string{
	"":                  "Top level",
	"server":            "`server:` — the file and how it is served",
	"client":            "`client:` — how it is read",
	results.SectionRDMA: "`rdma:` — the RDMA device and connection",
}

// parameters is the plan reference: one table per section.
func parameters() string {
	var b strings.Builder
	for _, sec := range []string{"", "server", "client", results.SectionRDMA} {
		ps := results.SectionParams(sec)
		if len(ps) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n#### %s\n\n", sectionTitles[sec])
		b.WriteString("| field | value | default | sweep | CSV column | node flag | meaning |\n|---|---|---|---|---|---|---|\n")
		for _, p := range ps {
			field := "`" + p.Path() + "`"
			if p.PerHost {
				field += ", or per host `hosts.<role>." + p.Path() + "`"
			}
			sweep := ""
			if p.Sweep {
				sweep = "yes"
			}
			col := results.ParamColumn(p.Name)
			if col != "" {
				col = "`" + col + "`"
			}
			flag := "`--" + p.Flag + "` (" + roleText(p.Role) + ")"
			if p.Flag == "" {
				flag = "runner only"
			}
			if p.Transports != nil {
				flag += ", " + strings.Join(p.Transports, ", ") + " only"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", field, valueText(p), defaultText(p), sweep, col, flag, p.Doc)
		}
	}
	b.WriteString("\n")
	return b.String()
}

func roleText(role string) string {
	if role == "both" {
		return "serve and read"
	}
	return role
}

// valueText is what a value may be: its kind and bounds, with each
// transport's tighter limit.
func valueText(p *results.Param) string {
	var s string
	switch p.Kind {
	case results.KindSize:
		s = "size"
		if p.Min > 0 {
			s += fmt.Sprintf(", ≥ %s", results.FormatSize(p.Min))
		}
		if below := results.FormatSize(p.Max + 1); p.Max > 0 && strings.Trim(below, "0123456789") != "" {
			s += ", < " + below // 2GiB reads better than 2147483647
		} else if p.Max > 0 {
			s += ", ≤ " + results.FormatSize(p.Max)
		}
	case results.KindInt:
		s = fmt.Sprintf("integer %d..%d", p.Min, p.Max)
		if p.Auto {
			s += " or `" + p.AutoText() + "`"
		}
	case results.KindEnum:
		s = "`" + strings.Join(p.Enum, "` or `") + "`"
	case results.KindBool:
		s = "`true` or `false`"
	case results.KindDuration:
		s = "duration"
		if p.Auto {
			s += " or `" + p.AutoText() + "`"
		}
	case results.KindPath:
		s = "absolute path"
	case results.KindString:
		s = "name"
	case results.KindRate:
		s = "rate, MB/s or iops"
	}
	if l := p.LimitsText(); l != "" {
		s += "; " + l
	}
	return s
}

func defaultText(p *results.Param) string {
	switch {
	case p.Required && p.Sweep:
		return "required, unless swept"
	case p.Required:
		return "required"
	case p.Auto && p.Default == "":
		return "`" + p.AutoText() + "`"
	case p.Default == "":
		return "none"
	}
	return "`" + p.Default + "`"
}

// columns is the CSV's column list, in order.
func columns() string {
	var b strings.Builder
	b.WriteString("\n| # | column | unit | what it holds |\n|---|---|---|---|\n")
	n := 0
	for _, f := range results.Schema() {
		if f.Column == "" {
			continue
		}
		n++
		doc := f.Doc
		if f.Param != nil {
			doc += " (parameter `" + f.Param.Path() + "`)"
		}
		fmt.Fprintf(&b, "| %d | `%s` | %s | %s |\n", n, f.Column, f.Unit, doc)
	}
	b.WriteString("\n")
	return b.String()
}
