package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestDrainUnderBlock(t *testing.T) {
	// HonoursParkedKeysAndCarriesOutReplays is the new
	// user's scenario of issue 39: messages of 8 keys, a few to a topic the
	// brokers lack, drained under the quarantine policy; later messages of the
	// held-back keys committed; a drain from a shell without
	// SPILLWAY_POISON_POLICY (block); the topic created, `parked replay --all
	// --yes`, a block drain again. The block drains keep the held-back keys
	// held back and carry the replays out; every key's first deliveries follow
	// commit order; and no summary says "0 pending" while anything is parked.
	t.Run("HonoursParkedKeysAndCarriesOutReplays", func(t *testing.T) {
		_, _, flags, kafka, w := quarantinedCLI(t)
		orders, late := kafka.Topic("orders"), kafka.Topic("late")
		commit := map[string][]string{}
		enqueue := func(from, to int, topic func(i int) string) {
			for i := from; i < to; i++ {
				key := fmt.Sprintf("key-%d", i%8)
				m, err := outbox.NewMessage(topic(i), []byte(key), []byte(fmt.Sprint(i)), outbox.MessageOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if m, err = w.Enqueue(t.Context(), m); err != nil {
					t.Fatal(err)
				}
				commit[key] = append(commit[key], m.ID.String())
			}
		}
		// drain drains with --json, then again for the text summary.
		drain := func(want int) (drainResult, string) {
			t.Helper()
			args := append([]string{"drain", "--brokers", strings.Join(kafka.Brokers, ","), "--timeout", "60s", "--progress", "0"}, flags...)
			code, js, errs := cli(t, append(args, "--json")...)
			var res drainResult
			if code != want || json.Unmarshal([]byte(js), &res) != nil {
				t.Fatalf("drain --json: exit %d, want %d: %s %s", code, want, js, errs)
			}
			// Again, for the text summary of what is left.
			code, out, errs := cli(t, args...)
			if code != want {
				t.Fatalf("drain: exit %d, want %d: %s %s", code, want, out, errs)
			}
			return res, out + errs
		}
		status := func() statusView {
			t.Helper()
			var st statusView
			code, out, errs := cli(t, append([]string{"status", "--json"}, flags...)...)
			if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
				t.Fatalf("status: exit %d: %s %s", code, out, errs)
			}
			return st
		}

		// 40 messages; keys 3 and 5 get one each to the missing topic.
		enqueue(0, 40, func(i int) string {
			if i == 11 || i == 13 {
				return late
			}
			return orders
		})
		res, out := drain(0)
		if res.ParkedNow == 0 || !strings.Contains(out, "left, all parked") || !strings.Contains(out, "2 keys held back") ||
			strings.Contains(out, "0 pending") || strings.Contains(out, "relay with SPILLWAY_POISON_POLICY=quarantine") {
			t.Fatalf("quarantine drain's summary:\n%s\nwant what is parked and why, no \"0 pending\" and no hint to quarantine", out)
		}
		parked := status().Parked
		if parked == 0 {
			t.Fatal("nothing parked")
		}

		// Later messages of every key, with no relay under quarantine left: a
		// block drain parks those of keys 3 and 5 behind their parked ones.
		t.Setenv(outboxconf.EnvPoisonPolicy, "block")
		enqueue(40, 56, func(int) string { return orders })
		res, out = drain(0)
		if res.Pending != 0 || res.HeldBackKeys != 2 || res.Parked != parked+4 || res.Marked != 0 {
			t.Fatalf("block drain: %+v; want nothing pending, keys 3 and 5 held back with their 4 later messages parked", res)
		}
		if strings.Contains(out, "0 pending") || !strings.Contains(out, "parked list") {
			t.Fatalf("block drain's summary:\n%s\nwant no \"0 pending\" and the way to the parked messages", out)
		}

		if err := kafka.CreateTopic(t.Context(), late, 1); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := cli(t, append([]string{"parked", "replay", "--all", "--yes"}, flags...)...); code != 0 {
			t.Fatalf("replay: exit %d: %s %s", code, out, errs)
		}
		st := status()
		if st.Marked != st.Parked || st.Parked == 0 || st.HeldBackKeys != 2 {
			t.Fatalf("status after the replay request: %d parked, %d marked, %d keys; want every parked message marked, 2 keys", st.Parked, st.Marked, st.HeldBackKeys)
		}
		if _, text, _ := cli(t, append([]string{"status"}, flags...)...); !strings.Contains(text, fmt.Sprintf("%d marked for replay", st.Marked)) || !strings.Contains(text, "MARKED") {
			t.Fatalf("status text lacks the marks:\n%s", text)
		}

		res, out = drain(0)
		if res.Published != st.Parked || res.Parked != 0 || res.Pending != 0 || !strings.Contains(out, "; 0 pending") {
			t.Fatalf("block drain after the replay: %+v\n%s\nwant the %d marked messages published and nothing left", res, out, st.Parked)
		}
		checkFirstDeliveries(t, commit, outboxtest.ConsumeAll(t, kafka, orders), outboxtest.ConsumeAll(t, kafka, late))
	})
}
