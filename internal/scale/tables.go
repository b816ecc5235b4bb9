package scale

import "github.com/spillway-dev/spillway/internal/lab"

// Tables renders the study as the bench command prints it: the coordination
// table, then the burst's figures.
func (s Study) Tables() []lab.Table {
	return []lab.Table{
		{Title: s.Title(), Header: s.Header(), Rows: s.Rows(), Notes: s.Notes()},
		{Title: s.Burst.Title(), Header: []string{"figure", "value"}, Rows: s.Burst.Rows(), Notes: s.Burst.Notes()},
	}
}
