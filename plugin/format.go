package plugin

// Output formats, as the docker CLI's. Every command takes --format:
//
//   - "" (the default): human text, or for a list its table;
//   - "json": the value's JSON form (a list: one object per line, as
//     docker ps, unless its schema is an array);
//   - a Go template, executed on the value (a list: on each row);
//   - for a list also "table" (its default table) and "table TEMPLATE" (a
//     header from the field names, the columns aligned), as docker ps.
//
// Lists go through docker/cli's formatter package, inspect through its
// inspect package: \t and \n typed in a shell's quotes are a tab and a
// newline, and the rules are docker's.
//
// Field names. A template sees a value's JSON form: its field names are
// those of --format json, snake_case ({{.scope}}, {{.last_used}},
// {{.limits.memory}}), as docker inspect's templates see the API's JSON.
// The rows of a list also have the columns of its default table, named as
// docker ps names its columns, CamelCase ({{.Scope}}, {{.LastUsed}}), with
// the text the table shows: "5 minutes ago", "-" for none, names from a
// sandbox quoted for the terminal. So `ls --format 'table
// {{.Scope}}\t{{.State}}'` shows two of the default table's columns, and
// `ls --format '{{.last_used}}'` a timestamp.

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"text/template"

	"github.com/docker/cli/cli/command/formatter"
	"github.com/docker/cli/cli/command/formatter/tabwriter"
	"github.com/docker/cli/templates"

	"github.com/docker-sandbox/docker-sandbox/core"
)

// isJSON reports whether format asks for the JSON form.
func isJSON(format string) bool {
	return format == formatter.JSONFormatKey || format == formatter.JSONFormat
}

// isDefault reports whether format asks for the human form (or a list's
// default table).
func isDefault(format string) bool { return format == "" || format == formatter.TableFormatKey }

// writeJSON prints v as one line of JSON, <, > and & as they are.
func writeJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// templateData is v as templates see it: its JSON form, numbers as they are
// written (2097152, not 2.097152e+06).
func templateData(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var g any
	if err := dec.Decode(&g); err != nil {
		return nil, err
	}
	return g, nil
}

// badTemplate is a --format template that does not parse or run.
func badTemplate(err error) error {
	return core.Wrap(core.CodeBadFlag, err, "invalid --format template")
}

// writeFormatted prints one value: with human() by default (nil: nothing),
// as JSON, or through a Go template on its JSON form.
func writeFormatted(out io.Writer, format string, v any, human func() error) error {
	switch {
	case isDefault(format) && human == nil:
		return nil
	case isDefault(format):
		return human()
	case isJSON(format):
		return writeJSON(out, v)
	}
	tmpl, err := templates.Parse(format)
	if err != nil {
		return badTemplate(err)
	}
	data, err := templateData(v)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, data); err != nil {
		return badTemplate(err)
	}
	buf.WriteByte('\n')
	_, err = out.Write(buf.Bytes())
	return err
}

// column is a column of a list's default table, and a field of its rows
// in templates: field is its name (CamelCase), header its heading, and
// cell the text a row shows (quoted for the terminal where it can come
// from a sandbox or an image).
type column[T any] struct {
	field  string
	header string
	cell   func(T) string
}

// listFormat is how a list of T prints.
type listFormat[T any] struct {
	columns []column[T]
	// table is the default table ("table {{.Scope}}\t...").
	table string
	// quiet is the format of -q.
	quiet string
	// jsonArray: --format json prints one JSON array (the list's
	// documented schema) instead of one object per line.
	jsonArray bool
}

// rowContext is a row as templates see it: its JSON fields and its
// columns' text.
type rowContext map[string]any

// FullHeader makes a row a formatter.SubContext (the header is the list's).
func (rowContext) FullHeader() any { return nil }

func (l listFormat[T]) row(v T) (rowContext, error) {
	r := rowContext{}
	data, err := templateData(v)
	if err != nil {
		return nil, err
	}
	if m, ok := data.(map[string]any); ok {
		for k, x := range m {
			r[k] = x
		}
	}
	for _, c := range l.columns {
		r[c.field] = c.cell(v)
	}
	return r, nil
}

// header is the heading of every field: a column's own, a JSON field's
// name in capitals (last_used: LAST USED).
func (l listFormat[T]) header() formatter.SubHeaderContext {
	h := formatter.SubHeaderContext{}
	var zero T
	v := any(zero)
	if t := reflect.TypeOf(v); t != nil && t.Kind() == reflect.Pointer {
		v = reflect.New(t.Elem()).Interface() // every field of a row
	}
	if data, err := templateData(v); err == nil {
		if m, ok := data.(map[string]any); ok {
			for k := range m {
				h[k] = strings.ToUpper(strings.ReplaceAll(k, "_", " "))
			}
		}
	}
	for _, c := range l.columns {
		h[c.field] = c.header
	}
	return h
}

// format is the format to render: the default table for "" and "table",
// the quiet one with quiet (unless a template is given, as docker ps).
func (l listFormat[T]) format(format string, quiet bool) string {
	switch {
	case quiet && isDefault(format):
		return l.quiet
	case isDefault(format):
		return l.table
	}
	return format
}

// write prints rows in format (see format).
func (l listFormat[T]) write(out io.Writer, format string, quiet bool, rows []T) error {
	format = l.format(format, quiet)
	if isJSON(format) {
		if l.jsonArray {
			if rows == nil {
				rows = []T{}
			}
			return writeJSON(out, rows)
		}
		for _, r := range rows {
			if err := writeJSON(out, r); err != nil {
				return err
			}
		}
		return nil
	}
	ctx := formatter.Context{Output: out, Format: formatter.Format(format)}
	var rowErr error
	err := ctx.Write(&formatter.HeaderContext{Header: l.header()}, func(each func(formatter.SubContext) error) error {
		for _, v := range rows {
			r, err := l.row(v)
			if err != nil {
				rowErr = err
				return err
			}
			if err := each(r); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case rowErr != nil:
		return rowErr
	case err != nil:
		return badTemplate(err)
	}
	return nil
}

// listStream prints rows of a list one at a time, as they come (egress
// logs -f), by the same rules as listFormat.write: a table's header comes
// with the first row, or at end when there was none.
type listStream[T any] struct {
	l      listFormat[T]
	out    io.Writer
	tw     *tabwriter.Writer // a table's
	tmpl   *template.Template
	header *template.Template // a table's heading
	// flush: each row is written at once (else at end, aligned together).
	flush   bool
	started bool
}

// stream starts a stream in format (not json: the caller prints JSON
// lines as they are).
func (l listFormat[T]) stream(out io.Writer, format string, flush bool) (*listStream[T], error) {
	f := formatter.Format(l.format(format, false))
	text := string(f)
	table := f.IsTable()
	if table {
		text = text[len(formatter.TableFormatKey):]
	}
	// As formatter.Context does.
	text = strings.NewReplacer(`\t`, "\t", `\n`, "\n").Replace(strings.Trim(text, " "))
	s := &listStream[T]{l: l, out: out, flush: flush}
	var err error
	if s.tmpl, err = templates.Parse(text); err != nil {
		return nil, badTemplate(err)
	}
	if table {
		if s.header, err = template.New("").Funcs(templates.HeaderFunctions).Parse(text); err != nil {
			return nil, badTemplate(err)
		}
		s.tw = tabwriter.NewWriter(out, 10, 1, 3, ' ', 0)
	}
	return s, nil
}

func (s *listStream[T]) start() error {
	if s.started || s.header == nil {
		s.started = true
		return nil
	}
	s.started = true
	var buf bytes.Buffer
	_ = s.header.Execute(&buf, s.l.header()) // as formatter.Context: a field without a heading stays empty
	buf.WriteByte('\n')
	_, err := s.tw.Write(buf.Bytes())
	return err
}

// row prints one row.
func (s *listStream[T]) row(v T) error {
	if err := s.start(); err != nil {
		return err
	}
	r, err := s.l.row(v)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := s.tmpl.Execute(&buf, r); err != nil {
		return badTemplate(err)
	}
	buf.WriteByte('\n')
	if s.tw == nil {
		_, err := s.out.Write(buf.Bytes())
		return err
	}
	if _, err := s.tw.Write(buf.Bytes()); err != nil {
		return err
	}
	if s.flush {
		return s.tw.Flush()
	}
	return nil
}

// end writes what is buffered, a table's header too when no row came
// (header false: only the rows that came).
func (s *listStream[T]) end(header bool) error {
	if header {
		if err := s.start(); err != nil {
			return err
		}
	}
	if s.tw != nil {
		return s.tw.Flush()
	}
	return nil
}
