package lab

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Table is a text table of one result: a title, a header row, rows of
// cells and notes printed under it.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
	Notes  []string
}

// Write renders t as an aligned plain-text table; columns of figures (every
// cell reads as a number) are right-aligned, header included, so figures
// line up.
func (t Table) Write(w io.Writer) error {
	widths := make([]int, len(t.Header))
	for i, h := range t.Header {
		widths[i] = utf8.RuneCountInString(h)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			if i < len(widths) {
				widths[i] = max(widths[i], utf8.RuneCountInString(c))
			}
		}
	}
	right := make([]bool, len(widths))
	for i := 1; i < len(right); i++ {
		right[i] = len(t.Rows) > 0
		for _, r := range t.Rows {
			if i < len(r) && !numeric(r[i]) {
				right[i] = false
			}
		}
	}
	var b strings.Builder
	if t.Title != "" {
		fmt.Fprintf(&b, "%s\n", t.Title)
	}
	line := func(cells []string) {
		var l strings.Builder
		for i := range widths {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			pad := strings.Repeat(" ", widths[i]-utf8.RuneCountInString(c))
			if i > 0 {
				l.WriteString("  ")
			}
			if right[i] {
				l.WriteString(pad + c)
			} else {
				l.WriteString(c + pad)
			}
		}
		fmt.Fprintf(&b, "%s\n", strings.TrimRight(l.String(), " "))
	}
	line(t.Header)
	rule := make([]string, len(widths))
	for i, n := range widths {
		rule[i] = strings.Repeat("-", n)
	}
	line(rule)
	for _, r := range t.Rows {
		line(r)
	}
	for _, n := range t.Notes {
		fmt.Fprintf(&b, "  %s\n", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// numeric reports whether a cell reads as a figure: digits with an optional
// sign, separators, unit prefix ($) or suffix (%, x, ms, s).
func numeric(c string) bool {
	c = strings.TrimPrefix(strings.TrimSpace(c), "$")
	for _, suffix := range []string{"%", "x", "ms", "s", " KB", " MB/s"} {
		c = strings.TrimSuffix(c, suffix)
	}
	if c == "" || c == "-" {
		return c == "-"
	}
	digits := 0
	for _, r := range c {
		switch {
		case r >= '0' && r <= '9':
			digits++
		case strings.ContainsRune("+-.,e ()", r):
		default:
			return false
		}
	}
	return digits > 0
}
