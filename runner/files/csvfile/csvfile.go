// Package csvfile is the results CSV on the runner's side: opened for
// appending under an exclusive lock, read whatever rdmasweep version wrote
// it, and upgraded to today's header. The row and its columns are
// results' (results.Row, results.Columns); this package is how they meet
// a file, so node, which only speaks the wire events, links no CSV code.
//
// The file's rules: the first line is an rdmasweep header, today's or an
// older one (today's cut short, never before the first header's end);
// columns are only appended; every row is one whole line, written in one
// write and fsynced, so a crash leaves at most a partial last line, which
// is not a row.
package csvfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"rdmasweep/results"
	"rdmasweep/runner/files/outdir"
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
	all := results.Columns
	if len(cols) < results.FirstHeaderLen || len(cols) > len(all) || !slices.Equal(cols, all[:len(cols)]) {
		return cols, false, false
	}
	return cols, len(cols) == len(all), len(cols) < len(all)
}

// File is a results file opened for appending. It holds an exclusive
// flock for its whole life, so two runners never interleave rows, and it
// only ever holds whole rows: each row goes in one write followed by
// fsync, and a failed write is truncated away.
type File struct {
	path string
	f    *os.File
	size int64         // bytes of whole rows; the next row is written here
	rows []results.Row // the rows present when the file was opened
}

// Open opens or creates path (and its directory), takes the lock, writes
// the header into an empty file or checks an existing one, and cuts off a
// partial last line left by a crash.
func Open(path string) (*File, error) {
	dir, err := outdir.Make(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	f, err := dir.OpenFile(filepath.Base(path), os.O_RDWR|os.O_CREATE, 0o644)
	dir.Close()
	if err != nil {
		return nil, err
	}
	c := &File{path: path, f: f}
	if err := c.open(); err != nil {
		f.Close()
		return nil, err
	}
	return c, nil
}

// lock takes f's exclusive lock without waiting.
func lock(f *os.File) error {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		if errors.Is(err, unix.EWOULDBLOCK) {
			return ErrLocked
		}
		return fmt.Errorf("lock: %w", err)
	}
	return nil
}

func (c *File) open() error {
	if err := lock(c.f); err != nil {
		return err
	}
	data, err := io.ReadAll(c.f)
	if err != nil {
		return err
	}
	if len(data) == 0 {
		return c.write([]byte(strings.Join(results.Columns, ",") + "\n"))
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
func (c *File) Rows() []results.Row { return c.rows }

// Path is the file's path.
func (c *File) Path() string { return c.path }

// Append writes r as one whole row, then fsyncs. On a short write (a full
// disk) the file is truncated back, so it never holds a partial row.
func (c *File) Append(r results.Row) error {
	b, err := encodeRow(r)
	if err != nil {
		return fmt.Errorf("encode row: %w", err)
	}
	return c.write(b)
}

func (c *File) write(b []byte) error {
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
func (c *File) Close() error { return c.f.Close() }

// Read reads a results file without locking it, whatever rdmasweep
// version wrote it: the columns an older header lacks are empty. A partial
// last line is ignored; a foreign header is ErrForeignHeader.
func Read(path string) ([]results.Row, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if _, current, older := headerOf(data); !current && !older {
		return nil, ErrForeignHeader
	}
	return parseRows(data[:bytes.LastIndexByte(data, '\n')+1])
}
