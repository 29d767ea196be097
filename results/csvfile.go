package results

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/gocarina/gocsv"
	"golang.org/x/sys/unix"

	"rdmasweep/internal/atomicfile"
)

// ErrForeignHeader means an existing CSV's header is not one rdmasweep
// ever wrote.
var ErrForeignHeader = errors.New("the file has a different header")

// ErrOlderHeader means an existing CSV was written by an older rdmasweep,
// with fewer columns; Upgrade adds them.
var ErrOlderHeader = errors.New("the file has an older rdmasweep header")

// ErrLocked means another process holds the CSV's lock.
var ErrLocked = errors.New("another runner is appending to it")

// headerOf returns the columns of data's first line and whether they are
// an rdmasweep header, the current one or an older one: older headers are
// the current one cut short, never before the first header's end.
func headerOf(data []byte) (cols []string, current, older bool) {
	line, _, _ := bytes.Cut(data, []byte("\n"))
	cols = strings.Split(string(bytes.TrimSuffix(line, []byte("\r"))), ",")
	if len(cols) < FirstHeaderLen || len(cols) > len(Columns) || !slices.Equal(cols, Columns[:len(cols)]) {
		return cols, false, false
	}
	return cols, len(cols) == len(Columns), len(cols) < len(Columns)
}

// CSV is a results file opened for appending. It holds an exclusive flock
// for its whole life, so two runners never interleave rows, and it only
// ever holds whole rows: each row goes in one write followed by fsync, and
// a failed write is truncated away.
type CSV struct {
	path string
	f    *os.File
	size int64 // bytes of whole rows; the next row is written here
	rows []Row // the rows present when the file was opened
}

// OpenCSV opens or creates path (and its directory), takes the lock,
// writes the header into an empty file or checks an existing one, and cuts
// off a partial last line left by a crash.
func OpenCSV(path string) (*CSV, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	c := &CSV{path: path, f: f}
	if err := c.open(); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

func (c *CSV) open() error {
	if err := unix.Flock(int(c.f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return ErrLocked
		}
		return fmt.Errorf("lock: %w", err)
	}
	data, err := io.ReadAll(c.f)
	if err != nil {
		return err
	}
	if len(data) == 0 {
		return c.write([]byte(strings.Join(Columns, ",") + "\n"))
	}
	// A crash can leave a partial last line; whole rows end in '\n'.
	whole := bytes.LastIndexByte(data, '\n') + 1
	_, current, older := headerOf(data)
	switch {
	case whole == 0 || !current && !older:
		return ErrForeignHeader
	case older:
		return ErrOlderHeader
	}
	if whole < len(data) {
		if err := c.f.Truncate(int64(whole)); err != nil {
			return fmt.Errorf("cut partial last line: %w", err)
		}
		if err := c.f.Sync(); err != nil {
			return err
		}
	}
	c.size = int64(whole)
	rows, err := parseRows(data[:whole])
	if err != nil {
		return err
	}
	c.rows = rows
	return nil
}

// Rows returns the rows the file held when it was opened.
func (c *CSV) Rows() []Row { return c.rows }

// Path is the file's path.
func (c *CSV) Path() string { return c.path }

// Append writes r as one whole row, then fsyncs. On a short write (a full
// disk) the file is truncated back, so it never holds a partial row.
func (c *CSV) Append(r Row) error {
	r.Error = oneLine(r.Error)
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write(r.record()); err != nil {
		return fmt.Errorf("encode row: %w", err)
	}
	w.Flush()
	return c.write(buf.Bytes())
}

func (c *CSV) write(b []byte) error {
	_, err := c.f.WriteAt(b, c.size)
	if err == nil {
		err = c.f.Sync()
	}
	if err != nil {
		// Put the file back as it was, whatever part of b reached it,
		// and report the write's own error. The part is measured: on an
		// error os.File.WriteAt counts 0 even when the kernel wrote some.
		var n int64
		if st, serr := c.f.Stat(); serr == nil {
			n = max(st.Size()-c.size, 0)
		}
		_ = c.f.Truncate(c.size)
		_ = c.f.Sync()
		return fmt.Errorf("write %s (%d of %d bytes reached the file, cut back): %w", c.path, n, len(b), err)
	}
	c.size += int64(len(b))
	return nil
}

// Close releases the lock and the file.
func (c *CSV) Close() error { return c.f.Close() }

// ReadCSV reads a results file without locking it, whatever rdmasweep
// version wrote it: the columns an older header lacks are empty. A partial
// last line is ignored; a foreign header is ErrForeignHeader.
func ReadCSV(path string) ([]Row, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if _, current, older := headerOf(data); !current && !older {
		return nil, ErrForeignHeader
	}
	return parseRows(data[:bytes.LastIndexByte(data, '\n')+1])
}

// parseRows reads whole rows under any rdmasweep header: gocsv fills Row's
// typed fields by column name, and the parameter columns go to Params.
func parseRows(data []byte) ([]Row, error) {
	var rows []Row
	r := csv.NewReader(bufio.NewReader(bytes.NewReader(data)))
	if err := gocsv.UnmarshalCSV(r, &rows); err != nil {
		return nil, fmt.Errorf("parse rows: %w", err)
	}
	records, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("parse rows: %w", err)
	}
	header := records[0]
	for i := range rows {
		row := &rows[i]
		// Every parameter column has a cell, empty where an older header
		// lacks the column, so a row reads the same before and after
		// Upgrade.
		row.Params = map[string]string{}
		for _, p := range params {
			if ParamColumn(p.Name) != "" {
				row.Params[p.Name] = ""
			}
		}
		v := reflect.ValueOf(row).Elem()
		for col, cell := range records[i+1] {
			if col >= len(header) {
				break
			}
			if p := ColumnParam(header[col]); p != nil {
				if cell != "" { // an empty cell is a missing name, as under an older header
					row.Params[p.Name] = cell
				}
				continue
			}
			// gocsv reads an empty cell into a pointer to zero; an
			// empty cell means "does not apply", which is nil.
			if f, ok := rowFields[header[col]]; ok && cell == "" && v.Field(f).Kind() == reflect.Pointer {
				v.Field(f).SetZero()
			}
		}
	}
	return rows, nil
}

// rowFields maps each column that is a field of Row to its index.
var rowFields = func() map[string]int {
	m := map[string]int{}
	t := reflect.TypeOf(Row{})
	for i := 0; i < t.NumField(); i++ {
		if tag := t.Field(i).Tag.Get("csv"); tag != "" && tag != "-" {
			m[tag] = i
		}
	}
	return m
}()

// record is r's cells in Columns order: parameter columns from Params, the
// others from Row's fields, formatted as gocsv reads them back (floats in
// the shortest form that round-trips, nil pointers empty).
func (r Row) record() []string {
	v := reflect.ValueOf(r)
	out := make([]string, len(Columns))
	for i, col := range Columns {
		if p := ColumnParam(col); p != nil {
			out[i] = r.Params[p.Name]
			continue
		}
		out[i] = formatCell(v.Field(rowFields[col]))
	}
	return out
}

func formatCell(f reflect.Value) string {
	if f.Kind() == reflect.Pointer {
		if f.IsNil() {
			return ""
		}
		f = f.Elem()
	}
	switch f.Kind() {
	case reflect.String:
		return f.String()
	case reflect.Int, reflect.Int64:
		return strconv.FormatInt(f.Int(), 10)
	case reflect.Float64:
		return strconv.FormatFloat(f.Float(), 'f', -1, 64)
	case reflect.Bool:
		return strconv.FormatBool(f.Bool())
	}
	panic("results: no CSV form for a Row field of kind " + f.Kind().String())
}

// Upgrade rewrites a CSV written by an older rdmasweep with today's
// header, leaving the columns it lacked empty. The rewrite is atomic, the
// old file is kept beside it (its path is returned), and the CSV's lock is
// held throughout, so a running exec is never rewritten under. A current
// header is left alone (backup ""); a foreign one is ErrForeignHeader.
func Upgrade(path string) (backup string, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return "", ErrLocked
		}
		return "", fmt.Errorf("lock: %w", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return "", err
	}
	switch _, current, older := headerOf(data); {
	case current:
		return "", nil
	case !older:
		return "", ErrForeignHeader
	}
	data = data[:bytes.LastIndexByte(data, '\n')+1] // a crash's partial line is not a row
	records, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		return "", fmt.Errorf("parse rows: %w", err)
	}
	for backup = path + ".bak"; ; backup += "~" {
		if _, err := os.Lstat(backup); errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	if err := os.Link(path, backup); err != nil {
		return "", fmt.Errorf("keep the old file: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		return "", err
	}
	err = atomicfile.Write(path, st.Mode().Perm(), func(w io.Writer) error {
		cw := csv.NewWriter(w)
		if err := cw.Write(Columns); err != nil {
			return err
		}
		for _, rec := range records[1:] {
			if err := cw.Write(append(rec, make([]string, len(Columns)-len(rec))...)); err != nil {
				return err
			}
		}
		cw.Flush()
		return cw.Error()
	})
	if err != nil {
		os.Remove(backup)
		return "", fmt.Errorf("rewrite: %w", err)
	}
	return backup, nil
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
