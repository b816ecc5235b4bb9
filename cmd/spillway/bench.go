package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spillway-dev/spillway/internal/bench"
	"github.com/spillway-dev/spillway/internal/lab"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// benchReport is the --json output.
type benchReport struct {
	Started time.Time     `json:"started"`
	Machine bench.Machine `json:"machine"`
	// RoundTrips are the delays added to the embedded backends' requests.
	RoundTrips lab.RoundTrips  `json:"roundTrips"`
	Scenarios  []benchScenario `json:"scenarios"`
}

type benchScenario struct {
	Name    string        `json:"name"`
	Elapsed time.Duration `json:"elapsedNanos"`
	Result  lab.Report    `json:"result"`
}

// The bench command's help lists its scenarios with what each measures,
// from the registry, so the list cannot disagree with what runs.
func init() {
	var b strings.Builder
	b.WriteString("Scenarios:\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, s := range lab.Scenarios(false) {
		fmt.Fprintf(tw, "  %s\t%s\n", s.Name, s.Summary)
	}
	tw.Flush()
	d := docs["bench"]
	d.details = strings.TrimSuffix(b.String(), "\n")
	docs["bench"] = d
}

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bench", stdout)
	endpoint := fs.String("dynamodb-endpoint", os.Getenv(outboxconf.EnvDynamoDBEndpoint),
		fmt.Sprintf("external DynamoDB endpoint URL (env %s; default: the embedded server)", outboxconf.EnvDynamoDBEndpoint))
	brokers := fs.String("brokers", os.Getenv(outboxconf.EnvKafkaBrokers),
		fmt.Sprintf("external Kafka seed brokers, host:port,host:port (env %s; default: the embedded cluster)", outboxconf.EnvKafkaBrokers))
	var names []string
	for _, s := range lab.Scenarios(false) {
		names = append(names, s.Name)
	}
	scenario := fs.String("scenario", "all", "scenarios to run, comma-separated: all or "+strings.Join(names, ", "))
	cases := fs.String("cases", "", "throughput scenario: the cases to run, comma-separated, named relays-buckets-value bytes (e.g. r1-b1-v1024,r1-b8-v1024; default all six)")
	messages := fs.Int("messages", 0, "messages per throughput case and samples per latency series (default: the scenario's: 5000 and 60)")
	sizes := fs.String("value-sizes", "", "memory scenario: value sizes in bytes, comma-separated; K suffix for KB (default 1K,64K,395K; at most 395K fits a 400 KB item with headers)")
	memory := fs.String("memory-mb", "", "memory scenario: relay memory sizes in MB, comma-separated (default 128,256,512)")
	drainCmd := fs.String("drain-command", "", "memory scenario: the spillway `EXECUTABLE` whose drain is measured, to compare releases (default: this one)")
	asJSON := fs.Bool("json", false, "print the results as JSON instead of tables")
	profileDir := fs.String("profile-dir", "", "write the labelled CPU profile of every throughput case to this directory (go tool pprof --tagfocus component=spillway)")
	roundTrips := roundTripFlags(fs)
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *messages < 0 {
		return usagef("--messages must be >= 0")
	}
	selected, err := selectScenarios(*scenario)
	if err != nil {
		return err
	}
	env := lab.Config{DynamoDBEndpoint: *endpoint, Messages: *messages, ProfileDir: *profileDir, DrainCommand: *drainCmd}
	env.Cases = splitList(*cases)
	if env.RoundTrips, err = roundTrips(); err != nil {
		return err
	}
	if env.ValueSizes, err = parseSizes("--value-sizes", *sizes, true); err != nil {
		return err
	}
	if env.MemoryMB, err = parseSizes("--memory-mb", *memory, false); err != nil {
		return err
	}
	env.Brokers = splitList(*brokers)
	if !*quiet {
		env.Progress = stderr
	}
	report := benchReport{Started: time.Now().UTC(), Machine: bench.DescribeMachine(), RoundTrips: env.RoundTrips}
	if !*asJSON {
		fmt.Fprintf(stdout, "Spillway benchmarks, %s\nMachine: %s\nBackends: %s\n\n", report.Started.Format(time.RFC3339), report.Machine, backendsLabel(env))
	}
	for _, s := range selected {
		start := time.Now()
		res, err := s.Run(ctx, env)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", s.Name, err)
		}
		elapsed := time.Since(start)
		report.Scenarios = append(report.Scenarios, benchScenario{Name: s.Name, Elapsed: elapsed, Result: res})
		if *asJSON {
			continue
		}
		for _, t := range res.Tables() {
			if err := t.Write(stdout); err != nil {
				return err
			}
			fmt.Fprintln(stdout)
		}
		if env.Progress != nil {
			fmt.Fprintf(env.Progress, "%s: done in %.1fs\n", s.Name, elapsed.Seconds())
		}
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(report)
	}
	return nil
}

// selectScenarios resolves --scenario: "all", or names in the order given.
// The CLI links only the real-time scenarios (internal/bench): the
// simulated studies run only as tests, in a synctest bubble, so a name it
// does not know may be one of them, and the refusal says where they run.
func selectScenarios(spec string) ([]lab.Scenario, error) {
	if strings.TrimSpace(spec) == "all" {
		return lab.Scenarios(false), nil
	}
	var out []lab.Scenario
	for _, name := range strings.Split(spec, ",") {
		name = strings.TrimSpace(name)
		s, ok := lab.Lookup(name)
		if !ok {
			var names []string
			for _, s := range lab.Scenarios(false) {
				names = append(names, s.Name)
			}
			return nil, usagef("unknown scenario %q (want all or %s; the simulated studies run as tests, in simulated time: make lab SCENARIO=NAME)",
				name, strings.Join(names, ", "))
		}
		out = append(out, s)
	}
	return out, nil
}

func backendsLabel(env lab.Config) string {
	ddb, kafka := "embedded DynamoDB (minidyn behind outboxlocal's compensating layer)", "embedded Kafka (kfake)"
	if env.DynamoDBEndpoint != "" {
		ddb = "DynamoDB at " + env.DynamoDBEndpoint
	}
	if len(env.Brokers) > 0 {
		kafka = "Kafka at " + strings.Join(env.Brokers, ",")
	}
	label := ddb + ", " + kafka + ", in this process"
	if env.RoundTrips != (lab.RoundTrips{}) {
		label += "\nRound trips added: " + env.RoundTrips.String()
	}
	return label
}

// roundTripFlags defines the delay flags; the function it returns checks
// them after parsing: a jitter in percent, delays only on the embedded
// backends (StartBackends refuses them on external ones, which have round
// trips of their own).
func roundTripFlags(fs *flagSet) func() (lab.RoundTrips, error) {
	ddb := fs.Duration("dynamodb-latency", 0, "delay the embedded DynamoDB adds to every request, as a round trip on AWS would (e.g. 5ms; default none)")
	kafka := fs.Duration("kafka-latency", 0, "delay the embedded Kafka adds to every produce and fetch request (e.g. 10ms; default none)")
	jitter := fs.String("latency-jitter", "0%", "spread of each request's delay: uniform over the latency ± this `PERCENT` of it (0% to 100%)")
	seed := fs.Uint64("latency-seed", 1, "seed of the delays' jitter: one seed, one sequence of delays")
	return func() (lab.RoundTrips, error) {
		pct, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(*jitter), "%"), 64)
		if err != nil || pct < 0 || pct > 100 {
			return lab.RoundTrips{}, usagef("--latency-jitter: %q is not a percentage from 0%% to 100%%", *jitter)
		}
		if *ddb < 0 || *kafka < 0 {
			return lab.RoundTrips{}, usagef("--dynamodb-latency and --kafka-latency must be >= 0")
		}
		if *ddb == 0 && *kafka == 0 {
			return lab.RoundTrips{}, nil
		}
		return lab.RoundTrips{DynamoDB: *ddb, Kafka: *kafka, Jitter: pct / 100, Seed: *seed}, nil
	}
}

// parseSizes reads a comma-separated list of positive sizes; with kb, a K
// suffix means KB.
func parseSizes(flag, list string, kb bool) ([]int, error) {
	var out []int
	for _, f := range strings.Split(list, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		mul := 1
		if s, ok := strings.CutSuffix(strings.ToUpper(f), "K"); ok && kb {
			f, mul = s, 1<<10
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, usagef("%s: %q is not a positive size", flag, f)
		}
		out = append(out, n*mul)
	}
	return out, nil
}

// splitList reads a comma-separated list, without blanks.
func splitList(list string) []string {
	var out []string
	for _, f := range strings.Split(list, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
