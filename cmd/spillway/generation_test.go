package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/generation"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestGeneration(t *testing.T) {
	// StatusSealFinish walks a bucket count change from 4 to 16
	// through the CLI: status before and after the relays opened the marker,
	// a seal that needs --yes, a finish refused while messages are left, then
	// accepted once the old generation is empty.
	t.Run("StatusSealFinish", func(t *testing.T) {
		ddb, table, conn := cliTable(t, "--bucket-count", "4")
		flags := append([]string{"--previous-key-prefix", "OUTBOX", "--previous-bucket-count", "4", "--key-prefix", "OUTBOX2", "--bucket-count", "16"}, conn...)
		gen := func(args ...string) (int, string, string) {
			return cli(t, append(append([]string{"generation"}, args...), flags...)...)
		}
		prevOpts := outboxddb.Options{TableName: table, BucketCount: 4}
		prev, err := outboxddb.NewStore(ddb.Client, outboxddb.StoreOptions{Options: prevOpts})
		if err != nil {
			t.Fatal(err)
		}
		w, err := outboxddb.NewWriter(ddb.Client, outboxddb.WriterOptions{Options: prevOpts})
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"a", "b"} {
			m, err := outbox.NewMessage("orders", []byte(key), []byte("v"), outbox.MessageOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Enqueue(t.Context(), m); err != nil {
				t.Fatal(err)
			}
		}

		code, out, errs := gen("status")
		if code != 0 || !strings.Contains(out, "OUTBOX/4: none") || !strings.Contains(out, "pending ~2") || !strings.Contains(out, "SPILLWAY_PREVIOUS_KEY_PREFIX=OUTBOX") {
			t.Fatalf("status before the relays ran: exit %d:\n%s%s", code, out, errs)
		}
		if code, _, errs = gen("seal", "--yes"); code != 1 || !strings.Contains(errs, "no generation marker") {
			t.Fatalf("seal without a marker: exit %d, %q; want 1 saying there is no marker", code, errs)
		}
		// The relays' first run opens the marker.
		if _, err := prev.OpenGeneration(t.Context(), generation.Generation{KeyPrefix: "OUTBOX2", BucketCount: 16}); err != nil {
			t.Fatal(err)
		}
		if code, out, _ = gen("status"); code != 0 || !strings.Contains(out, "OUTBOX/4: open (successor OUTBOX2/16)") || !strings.Contains(out, "give every writer both generations") {
			t.Fatalf("status when open: exit %d:\n%s", code, out)
		}
		if code, out, errs := gen("seal"); code != 0 || !strings.Contains(out, "dry run: nothing was sealed") || !strings.Contains(out, "add --yes") {
			t.Fatalf("seal without --yes: exit %d, %q %q; want 0 and a dry run saying how to apply it", code, out, errs)
		}
		if code, out, errs = gen("seal", "--yes"); code != 0 || !strings.Contains(out, "sealed OUTBOX/4") {
			t.Fatalf("seal --yes: exit %d: %s %s", code, out, errs)
		}
		if code, _, errs = gen("finish"); code != 1 || !strings.Contains(errs, "not empty yet: messages in buckets") {
			t.Fatalf("finish with messages left: exit %d, %q; want 1 naming the buckets", code, errs)
		}
		// The relays drain the old generation.
		for b := range 4 {
			msgs, err := prev.FetchBatch(t.Context(), b, 10)
			if err != nil {
				t.Fatal(err)
			}
			if err := prev.MarkPublished(t.Context(), b, msgs); err != nil {
				t.Fatal(err)
			}
		}
		if code, out, errs = gen("finish"); code != 0 || !strings.Contains(out, "drained OUTBOX/4") {
			t.Fatalf("finish when empty: exit %d: %s %s", code, out, errs)
		}
		if code, out, _ = gen("finish"); code != 0 || !strings.Contains(out, "already drained") {
			t.Fatalf("finish again: exit %d: %s", code, out)
		}
		var st generationStatus
		code, out, _ = gen("status", "--json")
		if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil || st.Phase != "drained" || st.PreviousPending != 0 || st.DrainedAt == nil {
			t.Fatalf("status --json when drained: exit %d, %v:\n%s", code, err, out)
		}
	})

	t.Run("BadInvocationsExitTwo", func(t *testing.T) {
		for _, args := range [][]string{
			{"generation"},
			{"generation", "rewind"},
			{"generation", "status", "--table", "t"},
			{"generation", "status", "--table", "t", "--previous-key-prefix", "OUTBOX"},
			{"generation", "status", "--table", "t", "--previous-key-prefix", "OUTBOX", "--previous-bucket-count", "4"},
			{"generation", "finish", "--table", "t", "--previous-key-prefix", "X", "--previous-bucket-count", "zero", "--key-prefix", "Y"},
		} {
			if code, _, errs := cli(t, args...); code != 2 || errs == "" {
				t.Errorf("%v: exit %d, stderr %q; want 2 with a reason", args, code, errs)
			}
		}
	})

	// A drain relays one generation: while the environment names a previous
	// one, it refuses instead of publishing the new generation early.
	t.Run("Drain_DuringABucketCountChange_Refuses", func(t *testing.T) {
		t.Setenv(outboxconf.EnvPreviousKeyPrefix, "OUTBOX")
		t.Setenv(outboxconf.EnvPreviousBucketCount, "8")
		code, _, errs := cli(t, "drain", "--table", "t", "--brokers", "127.0.0.1:9092", "--key-prefix", "OUTBOX2", "--bucket-count", "32")
		if code != 2 || !strings.Contains(errs, "--key-prefix OUTBOX --bucket-count 8") {
			t.Fatalf("drain during a change: exit %d, %q; want 2 naming the previous generation", code, errs)
		}
	})

	// A drain of the new generation alone refuses (exit 1, naming the old
	// generation) while the generation it replaces is not drained, and
	// publishes the new generation once it is.
	t.Run("Drain_OfTheNewGenerationAlone_WaitsForTheOldToDrain", func(t *testing.T) {
		e := newDrainEnv(t)
		prevOpts := outboxddb.Options{TableName: e.table, BucketCount: 4}
		prev, err := outboxddb.NewStore(e.ddb.Client, outboxddb.StoreOptions{Options: prevOpts})
		if err != nil {
			t.Fatal(err)
		}
		next := generation.Generation{KeyPrefix: "OUTBOX2", BucketCount: 16}
		if _, err := prev.OpenGeneration(t.Context(), next); err != nil {
			t.Fatal(err)
		}
		if _, err := prev.SealGeneration(t.Context(), next); err != nil {
			t.Fatal(err)
		}
		w, err := outboxddb.NewWriter(e.ddb.Client, outboxddb.WriterOptions{Options: outboxddb.Options{TableName: e.table, KeyPrefix: "OUTBOX2", BucketCount: 16}})
		if err != nil {
			t.Fatal(err)
		}
		m, err := outbox.NewMessage(e.kafka.Topic("orders"), []byte("k"), []byte("v"), outbox.MessageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Enqueue(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		drain := func() (int, string, string) {
			return cli(t, append([]string{"drain", "--brokers", e.brokers, "--key-prefix", "OUTBOX2", "--bucket-count", "16", "--timeout", "20s"}, e.flags...)...)
		}
		if code, out, errs := drain(); code != 1 || !strings.Contains(errs, "not open yet") || !strings.Contains(errs, "OUTBOX/4") {
			t.Fatalf("drain before the old generation is drained: exit %d, %q %q; want 1 naming OUTBOX/4", code, out, errs)
		}
		if _, err := prev.FinishGeneration(t.Context(), next); err != nil {
			t.Fatal(err)
		}
		if code, out, errs := drain(); code != 0 || len(outboxtest.ConsumeAll(t, e.kafka, e.kafka.Topic("orders"))) != 1 {
			t.Fatalf("drain after the old generation is drained: exit %d, %q %q; want the message published", code, out, errs)
		}
	})
}
