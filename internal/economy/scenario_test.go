package economy

import (
	"slices"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/internal/lab"
)

func TestRegistry(t *testing.T) {
	// BillStudies: the package registers the three bill studies,
	// simulated, from a message's requests to the whole bill, after the
	// real-time scenarios of the bench it builds them on.
	t.Run("BillStudies", func(t *testing.T) {
		var realTime, studies []string
		for _, s := range lab.Scenarios(false) {
			realTime = append(realTime, s.Name)
		}
		if got := strings.Join(realTime, ","); got != "throughput,latency,memory" {
			t.Errorf("real-time scenarios %v, want throughput, latency, memory", realTime)
		}
		for _, s := range lab.Scenarios(true) {
			if slices.Contains([]string{"cost", "idle", "economy"}, s.Name) {
				studies = append(studies, s.Name)
			}
		}
		if got := strings.Join(studies, ","); got != "cost,idle,economy" {
			t.Errorf("bill studies %v, want cost, idle, economy, simulated", studies)
		}
	})
}
