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
	"strings"

	"github.com/gocarina/gocsv"
	"golang.org/x/sys/unix"
)

// ErrForeignHeader means an existing CSV has a header other than Columns.
var ErrForeignHeader = errors.New("the file has a different header")

// ErrLocked means another process holds the CSV's lock.
var ErrLocked = errors.New("another runner is appending to it")

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
	header, _, _ := bytes.Cut(data, []byte("\n"))
	if whole == 0 || string(bytes.TrimSuffix(header, []byte("\r"))) != strings.Join(Columns, ",") {
		return ErrForeignHeader
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
	w := gocsv.NewSafeCSVWriter(csv.NewWriter(&buf))
	if err := gocsv.MarshalCSVWithoutHeaders([]Row{r}, w); err != nil {
		return fmt.Errorf("encode row: %w", err)
	}
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

// ReadCSV reads a results file without locking it. A partial last line is
// ignored; a foreign header is ErrForeignHeader.
func ReadCSV(path string) ([]Row, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	header, _, _ := bytes.Cut(data, []byte("\n"))
	if string(bytes.TrimSuffix(header, []byte("\r"))) != strings.Join(Columns, ",") {
		return nil, ErrForeignHeader
	}
	return parseRows(data[:bytes.LastIndexByte(data, '\n')+1])
}

func parseRows(data []byte) ([]Row, error) {
	var rows []Row
	r := csv.NewReader(bufio.NewReader(bytes.NewReader(data)))
	if err := gocsv.UnmarshalCSV(r, &rows); err != nil {
		return nil, fmt.Errorf("parse rows: %w", err)
	}
	// gocsv reads an empty cell into a pointer to zero; an empty cell means
	// "does not apply", which is nil.
	records, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("parse rows: %w", err)
	}
	for i := range rows {
		v := reflect.ValueOf(&rows[i]).Elem()
		for col, cell := range records[i+1] {
			if cell == "" && col < v.NumField() && v.Field(col).Kind() == reflect.Pointer {
				v.Field(col).SetZero()
			}
		}
	}
	return rows, nil
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
