package bench

import "github.com/spillway-dev/spillway/internal/lab"

// The real-time scenarios, which `spillway bench` runs. The simulated
// studies (internal/economy's cost and idle among them) run only in the
// lab's synctest bubble, and the CLI does not link them.
func init() {
	for _, s := range []lab.Scenario{throughputScenario, latencyScenario, memoryScenario} {
		lab.Register(s)
	}
}
