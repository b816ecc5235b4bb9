package main

import (
	"strings"
	"testing"
)

func TestDrainParked(t *testing.T) {
	// The drain summary says "0 pending" only when nothing is parked, and
	// names what is parked, held back and marked otherwise.
	t.Run("Summary_NamesWhatIsLeft", func(t *testing.T) {
		for _, c := range []struct {
			left    parkedLeft
			pending int64
			want    string
			explain []string
		}{
			{parkedLeft{}, 0, "published 7 in 1.5s; 0 pending", nil},
			{parkedLeft{}, 3, "published 7 in 1.5s; 3 pending", nil},
			{parkedLeft{Parked: 25, Marked: 25, HeldBackKeys: 1}, 0,
				"published 7 in 1.5s; 25 left, all parked (1 key held back, 25 marked for replay)",
				[]string{"25 marked for replay were not published before the timeout"}},
			{parkedLeft{Parked: 9, HeldBackKeys: 2, ParkedNow: 3}, 4,
				"published 7 in 1.5s; 13 left: 4 pending, 9 parked (2 keys held back, none marked for replay)",
				[]string{"this drain parked 3 messages", "parked messages wait for an operator, whatever the poison policy", "spillway parked list"}},
		} {
			if got := c.left.summary(7, 1.5, c.pending); got != c.want {
				t.Errorf("%+v, %d pending: summary %q, want %q", c.left, c.pending, got, c.want)
			}
			var b strings.Builder
			c.left.explain(&b)
			if len(c.explain) == 0 && b.Len() > 0 {
				t.Errorf("%+v: explains %q, want nothing", c.left, b.String())
			}
			for _, w := range c.explain {
				if !strings.Contains(b.String(), w) {
					t.Errorf("%+v: explains %q, want %q in it", c.left, b.String(), w)
				}
			}
		}
	})

	// A stuck head's hint depends on the policy: under quarantine the relays
	// park it themselves, so the hint does not tell the operator to switch.
	t.Run("StuckLine_HintFollowsThePolicy", func(t *testing.T) {
		stuck := []stuckBucket{{Bucket: 3, Error: "NOT_LEADER_FOR_PARTITION"}}
		block := (&waitReporter{}).stuckLine(stuck)
		quarantine := (&waitReporter{parkAfter: 10}).stuckLine(stuck)
		if !strings.Contains(block, "relay with SPILLWAY_POISON_POLICY=quarantine") {
			t.Errorf("block hint %q lacks the quarantine policy", block)
		}
		if strings.Contains(quarantine, "relay with SPILLWAY_POISON_POLICY=quarantine") || !strings.Contains(quarantine, "parked after 10 failed attempts") {
			t.Errorf("quarantine hint %q, want the park after 10 attempts and no switch", quarantine)
		}
	})
}
