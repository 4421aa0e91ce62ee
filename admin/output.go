package admin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// table collects rows and writes them with columns aligned: each column as wide as its widest
// cell, columns separated by two spaces, no trailing blanks.
type table struct {
	rows [][]string
}

func newTable(header ...string) *table { return &table{rows: [][]string{header}} }

// add appends a row; cells are rendered with fmt.Sprint.
func (tb *table) add(cells ...any) {
	row := make([]string, len(cells))
	for i, c := range cells {
		row[i] = fmt.Sprint(c)
	}
	tb.rows = append(tb.rows, row)
}

func (tb *table) write(w io.Writer) error {
	var widths []int
	for _, r := range tb.rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], len(c))
		}
	}
	var sb strings.Builder
	for _, r := range tb.rows {
		line := make([]byte, 0, 80)
		for i, c := range r {
			if i > 0 {
				line = append(line, "  "...)
			}
			line = append(line, c...)
			if i < len(r)-1 {
				line = append(line, strings.Repeat(" ", widths[i]-len(c))...)
			}
		}
		sb.Write(append([]byte(strings.TrimRight(string(line), " ")), '\n'))
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// jsonOut reports whether -o json was asked for.
func (t *Tool) jsonOut() bool { return t.cfg.Format == FormatJSON }

// printJSON writes v as indented JSON followed by a newline.
func (t *Tool) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode output: %w", err)
	}
	_, err = t.cfg.Out.Write(append(b, '\n'))
	return err
}

// printf writes formatted text to the output.
func (t *Tool) printf(format string, a ...any) { fmt.Fprintf(t.cfg.Out, format, a...) }

// TimeLayout is how tables render millisecond timestamps (Java's yyyy-MM-dd HH:mm:ss,SSS).
const TimeLayout = "2006-01-02 15:04:05,000"

// formatMillis renders a millisecond timestamp in the tool's location, or none for 0 and below.
func (t *Tool) formatMillis(ms int64, none string) string {
	if ms <= 0 {
		return none
	}
	return time.UnixMilli(ms).In(t.cfg.Location).Format(TimeLayout)
}
