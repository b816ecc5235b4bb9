package scale

import "github.com/spillway-dev/spillway/internal/bench"

// Tables renders the study as the bench command prints it: the coordination
// table, then the burst's figures.
func (s Study) Tables() []bench.Table {
	return []bench.Table{
		{Title: s.Title(), Header: s.Header(), Rows: s.Rows(), Notes: s.Notes()},
		{Title: s.Burst.Title(), Header: []string{"figure", "value"}, Rows: s.Burst.Rows(), Notes: s.Burst.Notes()},
	}
}
