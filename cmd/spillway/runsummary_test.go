package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/internal/lambdasim"
)

// goldenSummary is a run's figures as `make run` printed them on the day
// the summary was put into words.
var goldenSummary = runSummary{
	Verdict: verdict{Enqueued: 3000, Committed: 1500, Delivered: 3000, Records: 3000, KeysChecked: 60, Topics: 2, PairsChecked: 120},
	Elapsed: 28.2, Requests: map[string]int{"Query": 565, "UpdateItem": 1222}, RequestsPerMsg: 0.76, WCUPerMsg: 6.93, RCUPerMsg: 0.44,
	Relay: lambdasim.Stats{
		Invocations: 274, JoinedInvocations: 2, Environments: 4, Throttled: 218,
		InvocationsByTrigger: map[string]int{"wake": 269, "schedule": 5},
		InvocationsByReason:  map[string]int{"peer-live": 252, "nothing-pending": 20, "drained": 1, "budget": 1},
	},
	EMFFile: "/tmp/spillway-run-emf.jsonl", EMFLines: 481,
}

func TestRunSummary(t *testing.T) {
	// The demo's summary reads without knowing the relay's internals: the stop
	// reasons, the throttle count and "joined the fleet" are said in words, and
	// their raw names come only with -v (testdata/run/summary*.golden; go test
	// -run Golden -update rewrites them).
	t.Run("MatchesTheGoldenFiles", func(t *testing.T) {
		troubled := goldenSummary
		troubled.Relay.Errors, troubled.Relay.Killed, troubled.Relay.Dropped = 1, 2, 3
		for _, c := range []struct {
			name    string
			sum     runSummary
			verbose bool
		}{{"summary", goldenSummary, false}, {"summary-v", goldenSummary, true}, {"summary-troubled", troubled, false}} {
			verbose := c.verbose
			var out bytes.Buffer
			printSummary(&out, c.sum, verbose, 4)
			path := filepath.Join("testdata", "run", c.name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -run Golden -update writes it)", err)
			}
			if out.String() != string(want) {
				t.Errorf("%s differs from %s:\n%s", c.name, path, out.String())
			}
			for _, jargon := range []string{"throttled", "peer-live", "budget", "joined the fleet", "nothing-pending"} {
				if got := strings.Contains(out.String(), jargon); got != verbose {
					t.Errorf("verbose %v: %q in the summary is %v:\n%s", verbose, jargon, got, out.String())
				}
			}
		}
	})
}
