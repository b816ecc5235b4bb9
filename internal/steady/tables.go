package steady

import "github.com/spillway-dev/spillway/internal/lab"

// Tables renders the report as the bench command prints it: one table of
// figures against their targets.
func (r Report) Tables() []lab.Table {
	return []lab.Table{{Title: r.Title(), Header: []string{"figure", "value", "target"}, Rows: r.Rows(), Notes: r.Notes()}}
}
