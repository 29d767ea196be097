package results

import (
	"reflect"
	"slices"
)

// MetricColumns names the columns a row measures as numbers (figures of
// the run, not parameters), in header order: what compare and a plan's
// expectations and search may judge.
func MetricColumns() []string { return slices.Clone(metricColumns) }

// metricFields maps each metric column to its field of Row: a pointer to
// a float64 or an int64, nil when the cell is empty.
var metricFields = func() map[string]int {
	m := map[string]int{}
	t := reflect.TypeOf(Row{})
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("csv")
		if tag == "" || tag == "-" || f.Type.Kind() != reflect.Pointer {
			continue
		}
		if k := f.Type.Elem().Kind(); k == reflect.Float64 || k == reflect.Int64 {
			m[tag] = i
		}
	}
	return m
}()

// notFigures are numeric columns that name where a row stands, not what
// it measured.
var notFigures = map[string]bool{"round": true}

var metricColumns = func() []string {
	var cols []string
	for _, col := range Columns {
		if _, ok := metricFields[col]; ok && !notFigures[col] {
			cols = append(cols, col)
		}
	}
	return cols
}()

// Metric is the row's figure in the numeric column col, and false when
// the cell is empty or col is not a metric column.
func (r Row) Metric(col string) (float64, bool) {
	i, ok := metricFields[col]
	if !ok {
		return 0, false
	}
	f := reflect.ValueOf(r).Field(i)
	if f.IsNil() {
		return 0, false
	}
	switch f = f.Elem(); f.Kind() {
	case reflect.Float64:
		return f.Float(), true
	case reflect.Int64:
		return float64(f.Int()), true
	}
	return 0, false
}
