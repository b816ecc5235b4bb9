package main

import (
	"io"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

func TestTargetLatency(t *testing.T) {
	// --target-latency reaches drain's relays over SPILLWAY_TARGET_LATENCY;
	// without either they take the relay's default.
	t.Run("DrainTargetLatencyFlag", func(t *testing.T) {
		t.Setenv(outboxconf.EnvTargetLatency, "500ms")
		base := []string{"--table", "t", "--brokers", "127.0.0.1:9092"}
		for _, tc := range []struct {
			args []string
			want time.Duration
		}{
			{args: []string{"--target-latency", "250ms"}, want: 250 * time.Millisecond},
			{want: 500 * time.Millisecond},
		} {
			o, err := parseDrainFlags(append(base, tc.args...), io.Discard, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			if got := o.cfg.RelayOptions("r").TargetLatency; got != tc.want {
				t.Errorf("%v: relay TargetLatency %v, want %v", tc.args, got, tc.want)
			}
		}
		t.Setenv(outboxconf.EnvTargetLatency, "")
		o, err := parseDrainFlags(base, io.Discard, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if got := o.cfg.RelayOptions("r").WithDefaults().TargetLatency; got != outbox.DefaultTargetLatency {
			t.Errorf("relay TargetLatency %v, want the default %v", got, outbox.DefaultTargetLatency)
		}
		if _, err := parseDrainFlags(append(base, "--target-latency", "-1s"), io.Discard, io.Discard); err == nil {
			t.Error("a negative --target-latency was accepted")
		}
	})
}
