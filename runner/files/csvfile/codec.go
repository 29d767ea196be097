package csvfile

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"rdmasweep/results"
)

// The codec turns a results.Row into a CSV record and back, by the
// schema's columns: a parameter column is the row's Params cell, any other
// column the Row field tagged with its name. One reader, encoding/csv,
// reads every file; a cell reads back to the value it was written from,
// so a file re-encodes to the same bytes. An empty cell of a pointer
// field means "does not apply" and reads as nil.

// rowFields maps each column that is a field of Row to its index.
var rowFields = func() map[string]int {
	m := map[string]int{}
	t := reflect.TypeOf(results.Row{})
	for i := 0; i < t.NumField(); i++ {
		if tag := t.Field(i).Tag.Get("csv"); tag != "" && tag != "-" {
			m[tag] = i
		}
	}
	return m
}()

// encodeRow is r as one CSV line, its error cell on one line.
func encodeRow(r results.Row) ([]byte, error) {
	r.Error = oneLine(r.Error)
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	if err := w.Write(record(r)); err != nil {
		return nil, err
	}
	w.Flush()
	return buf.Bytes(), w.Error()
}

// record is r's cells in Columns order: parameter columns from Params, the
// others from Row's fields (floats in the shortest form that round-trips,
// nil pointers empty).
func record(r results.Row) []string {
	v := reflect.ValueOf(r)
	out := make([]string, len(results.Columns))
	for i, col := range results.Columns {
		if p := results.ColumnParam(col); p != nil {
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
	panic("csvfile: no CSV form for a Row field of kind " + f.Kind().String())
}

// parseRows reads whole rows under any rdmasweep header (the caller has
// checked it).
func parseRows(data []byte) ([]results.Row, error) {
	records, err := csv.NewReader(bytes.NewReader(data)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("parse rows: %w", err)
	}
	if len(records) == 0 {
		return nil, nil
	}
	header := records[0]
	rows := make([]results.Row, 0, len(records)-1)
	for i, rec := range records[1:] {
		row, err := decodeRow(header, rec)
		if err != nil {
			return nil, fmt.Errorf("parse rows: line %d: %w", i+2, err)
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// decodeRow reads one record under header. Every parameter column has a
// cell in Params, empty where an older header lacks the column, so a row
// reads the same before and after Upgrade.
func decodeRow(header, rec []string) (results.Row, error) {
	row := results.Row{Params: map[string]string{}}
	for _, c := range results.Columns {
		if p := results.ColumnParam(c); p != nil {
			row.Params[p.Name] = ""
		}
	}
	v := reflect.ValueOf(&row).Elem()
	for col, cell := range rec {
		if col >= len(header) {
			break
		}
		if p := results.ColumnParam(header[col]); p != nil {
			row.Params[p.Name] = cell
			continue
		}
		f, ok := rowFields[header[col]]
		if !ok {
			continue
		}
		if err := parseCell(v.Field(f), cell); err != nil {
			return results.Row{}, fmt.Errorf("column %s: %w", header[col], err)
		}
	}
	return row, nil
}

// parseCell sets f from cell, the inverse of formatCell: an empty cell is
// nil for a pointer and zero otherwise.
func parseCell(f reflect.Value, cell string) error {
	if cell == "" {
		f.SetZero()
		return nil
	}
	if f.Kind() == reflect.Pointer {
		f.Set(reflect.New(f.Type().Elem()))
		f = f.Elem()
	}
	switch f.Kind() {
	case reflect.String:
		f.SetString(cell)
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(cell), 10, 64)
		if err != nil {
			return err
		}
		f.SetInt(n)
	case reflect.Float64:
		x, err := strconv.ParseFloat(strings.TrimSpace(cell), 64)
		if err != nil {
			return err
		}
		f.SetFloat(x)
	case reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(cell))
		if err != nil {
			return err
		}
		f.SetBool(b)
	default:
		panic("csvfile: no CSV form for a Row field of kind " + f.Kind().String())
	}
	return nil
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}
