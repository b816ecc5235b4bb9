package bench

import "github.com/spillway-dev/spillway/internal/lab"

// The real-time scenarios, which `spillway bench` runs, come first; the
// simulated idle and per-message cost studies run only in the lab's
// synctest bubble.
func init() {
	for _, s := range []lab.Scenario{throughputScenario, latencyScenario, costScenario, idleScenario} {
		lab.Register(s)
	}
}
