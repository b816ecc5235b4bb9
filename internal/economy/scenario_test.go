package economy

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/internal/lab"
)

// checkRendering fails the test when a result does not marshal to JSON or
// renders no table with rows.
func checkRendering(t *testing.T, r lab.Report) {
	t.Helper()
	if _, err := json.Marshal(r); err != nil {
		t.Errorf("%T does not marshal: %v", r, err)
	}
	tables := r.Tables()
	if len(tables) == 0 {
		t.Fatalf("%T renders no table", r)
	}
	for _, tb := range tables {
		var b strings.Builder
		if err := tb.Write(&b); err != nil || len(tb.Rows) == 0 {
			t.Errorf("%T table %q: %d rows, %v", r, tb.Title, len(tb.Rows), err)
		}
	}
}

// TestRegistry_BillStudies: the package registers the three bill studies,
// simulated, from a message's requests to the whole bill, after the
// real-time scenarios of the bench it builds them on.
func TestRegistry_BillStudies(t *testing.T) {
	var realTime, studies []string
	for _, s := range lab.Scenarios(false) {
		realTime = append(realTime, s.Name)
	}
	if got := strings.Join(realTime, ","); got != "throughput,latency" {
		t.Errorf("real-time scenarios %v, want throughput, latency", realTime)
	}
	for _, s := range lab.Scenarios(true) {
		if slices.Contains([]string{"cost", "idle", "economy"}, s.Name) {
			studies = append(studies, s.Name)
		}
	}
	if got := strings.Join(studies, ","); got != "cost,idle,economy" {
		t.Errorf("bill studies %v, want cost, idle, economy, simulated", studies)
	}
}
