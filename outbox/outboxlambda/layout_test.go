package outboxlambda

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/internal/lambdalocal"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestLayout(t *testing.T) {
	// The relay function configured with 16 buckets on a table whose
	// layout record states 8: a wake-up with work reads the coordination
	// partition to decide whether to join, finds the record and fails the
	// invocation (the stack's RelayErrors alarm counts function errors)
	// before its heartbeat: no lease, no heartbeat record.
	t.Run("RelayWithAnotherCount_FailsBeforeItWrites", func(t *testing.T) {
		t.Parallel()
		b := setup(t, bundleOptions{vars: map[string]string{outboxconf.EnvBucketCount: "16"}})
		eight := b.cfg.WriterOptions()
		eight.BucketCount = 8
		if _, err := outboxddb.RecordLayout(t.Context(), b.ddb.Client, eight.Options, "test", "test"); err != nil {
			t.Fatal(err)
		}
		w, err := outboxddb.NewWriter(b.ddb.Client, eight)
		if err != nil {
			t.Fatal(err)
		}
		m, err := outbox.NewMessage(b.topic("orders"), []byte("k"), []byte("v"), outbox.MessageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m, err = w.Enqueue(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		wake, _ := json.Marshal(map[string]any{"trigger": "wake", "buckets": []int{m.Bucket()}})
		resp, err := b.relay.Handle(t.Context(), wake)
		var le *outboxddb.LayoutError
		if !errors.As(err, &le) || le.Recorded != 8 || le.Configured != 16 || resp.Reason != string(outbox.StopFatal) || resp.Joined {
			t.Fatalf("relay of 16 buckets: %+v, %v; want a function error with the *LayoutError, reason fatal", resp, err)
		}
		if leases := b.leases(t); len(leases) != 0 {
			t.Fatalf("lease items %v; want none", leases)
		}
		view, err := b.newStore(t, eight.Options).ReadCoordination(t.Context())
		if err != nil || len(view.Relays) != 0 {
			t.Fatalf("heartbeats %+v, %v; want none", view.Relays, err)
		}
	})

	// The enqueue function with another count than the record fails its
	// init, so no request is served with it.
	t.Run("EnqueueWithAnotherCount_FailsItsInit", func(t *testing.T) {
		api, err := lambdalocal.StartInvokeAPI()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = api.Close() })
		ddb := outboxtest.NewDynamoDB(t)
		table := outboxtest.CreateTable(t, ddb)
		if _, err := outboxddb.RecordLayout(t.Context(), ddb.Client, outboxddb.Options{TableName: table}, "test", "test"); err != nil {
			t.Fatal(err)
		}
		for k, v := range map[string]string{
			outboxconf.EnvTable: table, outboxconf.EnvDynamoDBEndpoint: ddb.Endpoint, outboxconf.EnvBucketCount: "16",
			"AWS_ENDPOINT_URL_LAMBDA": api.URL, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "spillway",
			"AWS_SECRET_ACCESS_KEY": "spillway", "AWS_EC2_METADATA_DISABLED": "true",
		} {
			t.Setenv(k, v)
		}
		getenv := os.Getenv
		_, err = NewEnqueueFromEnv(t.Context(), getenv, testLogger(t))
		if !errors.Is(err, outbox.ErrMisconfigured) || !strings.Contains(err.Error(), "records bucket count 8") || !strings.Contains(err.Error(), "uses 16") {
			t.Fatalf("init = %v, want the layout refusal naming 8 and 16", err)
		}
		t.Setenv(outboxconf.EnvBucketCount, "8")
		if _, err := NewEnqueueFromEnv(t.Context(), getenv, testLogger(t)); err != nil {
			t.Fatalf("init with the recorded count: %v", err)
		}
	})
}
