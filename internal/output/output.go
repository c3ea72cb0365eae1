package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"go.yaml.in/yaml/v2"
)

// Format is how a command's answer is written.
type Format string

// The formats of -o.
const (
	Table Format = "table"
	JSON  Format = "json"
	YAML  Format = "yaml"
	Value Format = "value"
)

// Formats lists the formats -o takes, for help and completion.
var Formats = []string{string(Table), string(JSON), string(YAML), string(Value)}

// ParseFormat checks an -o argument.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if s == f {
			return Format(f), nil
		}
	}
	return "", fmt.Errorf("unknown output format %q (want %s)", s, strings.Join(Formats, ", "))
}

// Options are a command's -o and -c.
type Options struct {
	Format Format
	// Columns keeps only these columns, in the command's order; empty
	// keeps every column.
	Columns []string
}

// List is rows of the same columns. A value is a string, a number, a
// bool, a []string, a map[string]string, or nil (nothing to show).
type List struct {
	Columns []string
	Rows    [][]any
}

// Record is one resource's fields, in order.
type Record struct {
	Fields []string
	Values []any
}

// UnknownColumnError is a -c naming no column of the answer.
type UnknownColumnError struct {
	Column    string
	Available []string
}

func (e *UnknownColumnError) Error() string {
	return fmt.Sprintf("no column %q (columns: %s)", e.Column, strings.Join(e.Available, ", "))
}

// pick is the indexes of the columns o keeps of cols.
func (o Options) pick(cols []string) ([]int, error) {
	if len(o.Columns) == 0 {
		idx := make([]int, len(cols))
		for i := range cols {
			idx[i] = i
		}
		return idx, nil
	}
	want := map[int]bool{}
	for _, c := range o.Columns {
		found := false
		for i, col := range cols {
			if strings.EqualFold(c, col) {
				want[i], found = true, true
			}
		}
		if !found {
			return nil, &UnknownColumnError{Column: c, Available: cols}
		}
	}
	var idx []int
	for i := range cols {
		if want[i] {
			idx = append(idx, i)
		}
	}
	return idx, nil
}

// WriteList writes l in o's format.
func (o Options) WriteList(w io.Writer, l List) error {
	idx, err := o.pick(l.Columns)
	if err != nil {
		return err
	}
	cols := project(l.Columns, idx)
	rows := make([][]any, len(l.Rows))
	for i, r := range l.Rows {
		rows[i] = projectAny(r, idx)
	}
	switch o.Format {
	case JSON:
		objs := make([]json.RawMessage, len(rows))
		for i, r := range rows {
			if objs[i], err = jsonObject(cols, r); err != nil {
				return err
			}
		}
		return writeJSON(w, objs)
	case YAML:
		if len(rows) == 0 {
			_, err := io.WriteString(w, "[]\n")
			return err
		}
		objs := make([]yaml.MapSlice, len(rows))
		for i, r := range rows {
			objs[i] = yamlObject(cols, r)
		}
		return writeYAML(w, objs)
	case Value:
		for _, r := range rows {
			cells := make([]string, len(r))
			for i, v := range r {
				cells[i] = text(v)
			}
			if _, err := fmt.Fprintln(w, strings.Join(cells, " ")); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(cols, "\t")))
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, v := range r {
			cells[i] = cell(v)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// WriteRecord writes r in o's format: a two-column table of fields and
// values, one object, or the values one a line.
func (o Options) WriteRecord(w io.Writer, r Record) error {
	idx, err := o.pick(r.Fields)
	if err != nil {
		return err
	}
	fields, values := project(r.Fields, idx), projectAny(r.Values, idx)
	switch o.Format {
	case JSON:
		obj, err := jsonObject(fields, values)
		if err != nil {
			return err
		}
		return writeJSON(w, obj)
	case YAML:
		return writeYAML(w, yamlObject(fields, values))
	case Value:
		for _, v := range values {
			if _, err := fmt.Fprintln(w, text(v)); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for i, f := range fields {
		fmt.Fprintf(tw, "%s\t%s\n", f, cell(values[i]))
	}
	return tw.Flush()
}

func project(s []string, idx []int) []string {
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = s[j]
	}
	return out
}

func projectAny(s []any, idx []int) []any {
	out := make([]any, len(idx))
	for i, j := range idx {
		if j < len(s) {
			out[i] = s[j]
		}
	}
	return out
}

// jsonObject is {"col": value, ...} in the columns' order, which
// encoding/json's maps would sort.
func jsonObject(cols []string, vals []any) (json.RawMessage, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, c := range cols {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(c)
		b.Write(k)
		b.WriteByte(':')
		v, err := marshal(vals[i])
		if err != nil {
			return nil, fmt.Errorf("column %s: %w", c, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal is json.Marshal without escaping <, > and &, which a script
// comparing text would see.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func writeJSON(w io.Writer, v any) error {
	raw, err := marshal(v)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return err
	}
	b.WriteByte('\n')
	_, err = w.Write(b.Bytes())
	return err
}

func yamlObject(cols []string, vals []any) yaml.MapSlice {
	m := make(yaml.MapSlice, len(cols))
	for i, c := range cols {
		m[i] = yaml.MapItem{Key: c, Value: vals[i]}
	}
	return m
}

func writeYAML(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// text is a value as a script reads it: lists comma-separated, maps as
// sorted key=value pairs, nothing as "".
func text(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case []string:
		return strings.Join(v, ",")
	case map[string]string:
		kv := make([]string, 0, len(v))
		for k, val := range v {
			kv = append(kv, k+"="+val)
		}
		sort.Strings(kv)
		return strings.Join(kv, ",")
	}
	return fmt.Sprint(v)
}

// cell is a value in a table: as text, "-" for nothing, and a line break
// as a space so a row stays one line.
func cell(v any) string {
	s := text(v)
	if s == "" {
		return "-"
	}
	return strings.ReplaceAll(s, "\n", " ")
}
