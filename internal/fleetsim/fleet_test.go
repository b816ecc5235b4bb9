package fleetsim

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment of the simulation tests.
const (
	// envSeed makes TestFleetSeed run that one seed (TestFleet's children).
	envSeed = "SPILLWAY_FLEET_SEED"
	// envSoakSeed and envSoakDuration start TestFleetSoak (make soak).
	envSoakSeed     = "SPILLWAY_SOAK_SEED"
	envSoakDuration = "SPILLWAY_SOAK_DURATION"
	// reportPrefix marks the line a child prints its report on.
	reportPrefix = "FLEETSIM-REPORT "
)

// ciSeeds are the seeds of the CI run: 3 × 3,334 messages.
var ciSeeds = []uint64{11, 22, 33}

// TestFleet is the CI run: the seeds of ciSeeds, each in a child process
// of this test binary, side by side, overlapping one seed's waits for
// DynamoDB and Kafka with another's work. Each driver looks only at its own
// simulation's goroutines, so seeds could share a process; but each look
// stops the world, and three drivers stopping each other's simulations
// made the run several times slower than three processes.
func TestFleet(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Now()
	type outcome struct {
		out []byte
		err error
		rep *Report
	}
	outcomes := make([]outcome, len(ciSeeds))
	var wg sync.WaitGroup
	for i, seed := range ciSeeds {
		wg.Go(func() {
			args := []string{"-test.run=^TestFleetSeed$", "-test.v"}
			if d, ok := t.Deadline(); ok {
				args = append(args, "-test.timeout="+time.Until(d).Round(time.Second).String())
			}
			cmd := exec.CommandContext(t.Context(), exe, args...)
			cmd.Env = append(os.Environ(), envSeed+"="+strconv.FormatUint(seed, 10))
			out, err := cmd.CombinedOutput()
			outcomes[i] = outcome{out: out, err: err, rep: parseReport(out)}
		})
	}
	wg.Wait()

	var total Report
	for i, seed := range ciSeeds {
		o := outcomes[i]
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			if o.err != nil || o.rep == nil {
				t.Fatalf("seed %d: %v\n%s", seed, o.err, childFailure(o.out))
			}
			t.Log(o.rep)
			checkReport(t, o.rep)
		})
		if o.rep != nil {
			total.Messages += o.rep.Messages
			total.Committed += o.rep.Committed
			total.Delivered += o.rep.Delivered
			total.Duplicates += o.rep.Duplicates
			total.Refused += o.rep.Refused
			total.QuietRounds += o.rep.QuietRounds
			total.SimDuration += o.rep.SimDuration
		}
	}
	t.Logf("fleet simulation: %d seeds, %d messages (%d committed, %d delivered), %d duplicates, %d refused writes (0 of them in %d quiet rounds), %v simulated, wall %v",
		len(ciSeeds), total.Messages, total.Committed, total.Delivered, total.Duplicates, total.Refused, total.QuietRounds,
		total.SimDuration.Round(time.Second), time.Since(wall).Round(time.Second))
}

// checkReport asserts that a passing run exercised what it claims to: the
// invariants themselves are checked by Run.
func checkReport(t *testing.T, r *Report) {
	t.Helper()
	switch {
	case r.Committed == 0 || r.Delivered < r.Committed:
		t.Errorf("%d committed, %d delivered", r.Committed, r.Delivered)
	case r.Joined == 0:
		t.Error("no relay ever joined the fleet")
	case r.SteadyPhases > 0 && r.QuietRounds == 0:
		t.Error("no acquisition round fell in a quiet window: the zero-refusal check was vacuous")
	case len(r.Faults) == 0:
		t.Error("no fault was injected")
	}
	if over := r.RefusalBoundExceeded(); over != "" {
		t.Error(over)
	}
}

// TestFleetSeed runs the seed in SPILLWAY_FLEET_SEED: one child of
// TestFleet, or a replay of one CI seed by hand.
func TestFleetSeed(t *testing.T) {
	raw := os.Getenv(envSeed)
	if raw == "" {
		t.Skip("runs one seed for TestFleet in a child process; set " + envSeed + " to run one by hand")
	}
	seed, err := strconv.ParseUint(raw, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", envSeed, raw, err)
	}
	runAndReport(t, NewConfig(seed), true)
}

// TestFleetSoak is the long run of `make soak SEED=… DURATION=…`: the
// seed (random when unset) writing over DURATION of simulated time (six
// minutes when unset: the CI run of that seed) at the CI message rate.
func TestFleetSoak(t *testing.T) {
	rawSeed, rawDur := os.Getenv(envSoakSeed), os.Getenv(envSoakDuration)
	if rawSeed == "" && rawDur == "" {
		t.Skip("soak run: set " + envSoakSeed + " and/or " + envSoakDuration + " (make soak SEED=… DURATION=…)")
	}
	seed := rand.Uint64() % 1_000_000
	if rawSeed != "" {
		var err error
		if seed, err = strconv.ParseUint(rawSeed, 10, 64); err != nil {
			t.Fatalf("%s=%q: %v", envSoakSeed, rawSeed, err)
		}
	}
	d := ciWriteDuration
	if rawDur != "" && rawDur != "0" {
		var err error
		if d, err = time.ParseDuration(rawDur); err != nil {
			t.Fatalf("%s=%q: %v", envSoakDuration, rawDur, err)
		}
	}
	t.Logf("soak: seed %d, writes over %v of simulated time", seed, d)
	runAndReport(t, SoakConfig(seed, d), false)
}

// runAndReport runs cfg and logs its report; a child of TestFleet also
// prints it for its parent.
func runAndReport(t *testing.T, cfg Config, child bool) {
	t.Helper()
	cfg.Logf = t.Logf
	rep, err := Run(t.Context(), cfg)
	if rep != nil {
		if b, jerr := json.Marshal(rep); jerr == nil && child {
			fmt.Println(reportPrefix + string(b))
		}
		t.Log(rep)
	}
	if err != nil {
		t.Fatal(err)
	}
	checkReport(t, rep)
}

func parseReport(out []byte) *Report {
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		if line, ok := strings.CutPrefix(sc.Text(), reportPrefix); ok {
			var r Report
			if json.Unmarshal([]byte(line), &r) == nil {
				return &r
			}
		}
	}
	return nil
}

// childFailure returns a failed child's output without its report line.
func childFailure(out []byte) string {
	var b strings.Builder
	for _, line := range strings.Split(string(out), "\n") {
		if !strings.HasPrefix(line, reportPrefix) {
			b.WriteString(line)
			b.WriteString("\n")
		}
	}
	return b.String()
}
