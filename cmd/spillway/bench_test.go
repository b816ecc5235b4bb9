package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/internal/bench"
	"github.com/spillway-dev/spillway/internal/lab"
)

// benchProbe is a scenario registered by this test: it records the
// environment it was given and returns a one-row result, so the command's
// flags and output are tested without running a measurement.
type benchProbe struct {
	Env  lab.Config `json:"-"`
	Rows int        `json:"rows"`
}

func (p benchProbe) Tables() []lab.Table {
	return []lab.Table{{Title: "probe", Header: []string{"what", "n"}, Rows: [][]string{{"rows", "1"}}}}
}

var probeEnvs = make(chan lab.Config, 8)

func init() {
	lab.Register(lab.Scenario{Name: "cli-probe", Summary: "test probe", Run: func(_ context.Context, env lab.Config) (lab.Report, error) {
		probeEnvs <- env
		return benchProbe{Rows: 1}, nil
	}})
}

func runBenchCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runCLI(t.Context(), append([]string{"bench"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

func TestBench(t *testing.T) {
	t.Run("FlagsReachTheScenarioAndTablesArePrinted", func(t *testing.T) {
		code, out, errs := runBenchCLI(t, "--scenario", "cli-probe", "--messages", "7", "--brokers", "a:1, b:2",
			"--dynamodb-endpoint", "http://127.0.0.1:1", "--profile-dir", "/tmp/p", "--quiet")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		env := <-probeEnvs
		if env.Messages != 7 || strings.Join(env.Brokers, ",") != "a:1,b:2" || env.DynamoDBEndpoint != "http://127.0.0.1:1" ||
			env.ProfileDir != "/tmp/p" || env.Progress != nil {
			t.Errorf("env %+v", env)
		}
		for _, want := range []string{"Machine: ", "probe\n", "rows  1"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q:\n%s", want, out)
			}
		}
	})

	t.Run("RoundTripsAndCasesReachTheScenario", func(t *testing.T) {
		code, out, errs := runBenchCLI(t, "--scenario", "cli-probe", "--cases", "r1-b1-v1024, r1-b8-v1024",
			"--dynamodb-latency", "5ms", "--kafka-latency", "10ms", "--latency-jitter", "20%", "--latency-seed", "7", "--quiet")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		env := <-probeEnvs
		want := lab.RoundTrips{DynamoDB: 5 * time.Millisecond, Kafka: 10 * time.Millisecond, Jitter: 0.2, Seed: 7}
		if env.RoundTrips != want || strings.Join(env.Cases, ",") != "r1-b1-v1024,r1-b8-v1024" {
			t.Errorf("round trips %+v, cases %q; want %+v and the two cases", env.RoundTrips, env.Cases, want)
		}
		if !strings.Contains(out, "Round trips added: DynamoDB 5ms a request, Kafka 10ms a produce or fetch, jitter ±20%, seed 7") {
			t.Errorf("the header does not name the round trips:\n%s", out)
		}
	})

	t.Run("JSONCarriesTheMachineAndResults", func(t *testing.T) {
		code, out, errs := runBenchCLI(t, "--scenario", "cli-probe", "--json")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		<-probeEnvs
		var report struct {
			Machine   bench.Machine
			Scenarios []struct {
				Name   string
				Result benchProbe
			}
		}
		if err := json.Unmarshal([]byte(out), &report); err != nil {
			t.Fatalf("%v:\n%s", err, out)
		}
		if report.Machine.CPUs < 1 || len(report.Scenarios) != 1 || report.Scenarios[0].Name != "cli-probe" || report.Scenarios[0].Result.Rows != 1 {
			t.Errorf("report %+v", report)
		}
	})

	t.Run("BadInvocationsExitTwo", func(t *testing.T) {
		for _, args := range [][]string{
			{"--scenario", "no-such"},
			{"--scenario", "latency,no-such"},
			{"--scenario", "idle"}, // a simulated study, which the CLI does not link
			{"--messages", "-1"},
			{"--dynamodb-latency", "5ms", "--latency-jitter", "150%"},
			{"--kafka-latency", "-1ms"},
			{"extra"},
		} {
			if code, _, errs := runBenchCLI(t, args...); code != 2 || errs == "" {
				t.Errorf("%v: exit %d, stderr %q; want 2 and a reason", args, code, errs)
			}
		}
	})
}
