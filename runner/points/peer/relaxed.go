package peer

// relaxedJSON reads what perftest 4.5's --out_json writes: JSON's shape
// with bare keys ("MsgSize: 65536,"), keys with spaces ("TX_depth : 128",
// "Test with events: ..."), bare word values ("test: READ_BW_Test,"),
// and a comma after every entry, the last included:
//
//	{
//	test_info: {
//	test: READ_BW_Test,
//	Device: "rxe0",
//	},
//	results: {
//	MsgSize: 1048576,
//	BW_average: 24.31,
//	},
//	}
//
// A key runs to its colon; a value is an object, a quoted string, or a
// bare word running to the next comma, newline or closing brace, read as
// a number when it is one. Real JSON reads the same way.

import (
	"fmt"
	"strconv"
	"strings"
)

const relaxedMaxDepth = 8

func parseRelaxed(b []byte) (map[string]any, error) {
	p := &relaxed{s: string(b)}
	p.space()
	obj, err := p.object(0)
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i != len(p.s) {
		return nil, p.errorf("text after the closing brace")
	}
	return obj, nil
}

type relaxed struct {
	s string
	i int
}

func (p *relaxed) errorf(format string, args ...any) error {
	line := 1 + strings.Count(p.s[:min(p.i, len(p.s))], "\n")
	return fmt.Errorf("line %d: %s", line, fmt.Sprintf(format, args...))
}

func (p *relaxed) space() {
	for p.i < len(p.s) && strings.IndexByte(" \t\r\n", p.s[p.i]) >= 0 {
		p.i++
	}
}

func (p *relaxed) object(depth int) (map[string]any, error) {
	if depth > relaxedMaxDepth {
		return nil, p.errorf("objects nested deeper than %d", relaxedMaxDepth)
	}
	if p.i >= len(p.s) || p.s[p.i] != '{' {
		return nil, p.errorf("want '{'")
	}
	p.i++
	obj := map[string]any{}
	for {
		p.space()
		if p.i >= len(p.s) {
			return nil, p.errorf("unterminated object")
		}
		if p.s[p.i] == '}' {
			p.i++
			return obj, nil
		}
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		p.space()
		v, err := p.value(depth)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		obj[key] = v
		p.space()
		if p.i < len(p.s) && p.s[p.i] == ',' {
			p.i++
		}
	}
}

// key reads up to the next colon on the same line.
func (p *relaxed) key() (string, error) {
	if p.s[p.i] == '"' {
		k, err := p.quoted()
		if err != nil {
			return "", err
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return "", p.errorf("want ':' after key %q", k)
		}
		p.i++
		return k, nil
	}
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != ':' {
		if strings.IndexByte("{}\",\n", p.s[p.i]) >= 0 {
			return "", p.errorf("want a key and ':'")
		}
		p.i++
	}
	if p.i >= len(p.s) {
		return "", p.errorf("want ':' after key")
	}
	k := strings.TrimSpace(p.s[start:p.i])
	p.i++
	if k == "" {
		return "", p.errorf("empty key")
	}
	return k, nil
}

func (p *relaxed) value(depth int) (any, error) {
	if p.i >= len(p.s) {
		return nil, p.errorf("missing value")
	}
	switch p.s[p.i] {
	case '{':
		return p.object(depth + 1)
	case '"':
		return p.quoted()
	}
	start := p.i
	for p.i < len(p.s) && strings.IndexByte(",\n}", p.s[p.i]) < 0 {
		p.i++
	}
	w := strings.TrimSpace(p.s[start:p.i])
	if w == "" {
		return nil, p.errorf("missing value")
	}
	if f, err := strconv.ParseFloat(w, 64); err == nil {
		return f, nil
	}
	return w, nil
}

// quoted reads a string in double quotes; perftest writes no escapes, and
// JSON's simple ones are taken as they come.
func (p *relaxed) quoted() (string, error) {
	p.i++ // the opening quote
	start := p.i
	for p.i < len(p.s) && p.s[p.i] != '"' {
		if p.s[p.i] == '\\' {
			p.i++
		}
		p.i++
	}
	if p.i >= len(p.s) {
		p.i = len(p.s)
		return "", p.errorf("unterminated string")
	}
	s := p.s[start:p.i]
	p.i++
	return s, nil
}
