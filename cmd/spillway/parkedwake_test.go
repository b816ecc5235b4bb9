package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxwake"
)

func TestParkedReplay(t *testing.T) {
	// `parked replay --yes` wakes the relay function, when one is configured,
	// for the buckets of the marked messages: the replay does not wait for the
	// schedule. A dry run wakes nothing.
	t.Run("WakesTheRelayFunction", func(t *testing.T) {
		_, _, flags, kafka, w := quarantinedCLI(t)
		var (
			mu      sync.Mutex
			invokes []string
			wakes   []outboxwake.Payload
		)
		lambdaAPI := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			var p outboxwake.Payload
			_ = json.Unmarshal(body, &p)
			mu.Lock()
			invokes = append(invokes, r.URL.Path+" "+r.Header.Get("X-Amz-Invocation-Type"))
			wakes = append(wakes, p)
			mu.Unlock()
			rw.WriteHeader(http.StatusAccepted)
		}))
		defer lambdaAPI.Close()
		t.Setenv("AWS_ENDPOINT_URL_LAMBDA", lambdaAPI.URL)
		t.Setenv("AWS_ACCESS_KEY_ID", "local")
		t.Setenv("AWS_SECRET_ACCESS_KEY", "local")
		t.Setenv("AWS_REGION", "us-east-1")

		m, err := outbox.NewMessage("no-such-topic", []byte("k"), []byte("v"), outbox.MessageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m, err = w.Enqueue(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		drain := append([]string{"drain", "--brokers", strings.Join(kafka.Brokers, ","), "--timeout", "30s", "--progress", "0"}, flags...)
		if code, out, errs := cli(t, drain...); code != 0 {
			t.Fatalf("drain: exit %d: %s %s", code, out, errs)
		}
		replay := append([]string{"parked", "replay", "--all", "--relay-function", "spillway-relay"}, flags...)
		if code, out, errs := cli(t, replay...); code != 0 || len(invokes) != 0 {
			t.Fatalf("dry run: exit %d, %d invokes: %s %s; want 0 and none", code, len(invokes), out, errs)
		}
		code, out, errs := cli(t, append(replay, "--yes")...)
		if code != 0 || !strings.Contains(out, "woke spillway-relay") {
			t.Fatalf("replay: exit %d: %s %s; want the wake-up reported", code, out, errs)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(wakes) != 1 || invokes[0] != "/2015-03-31/functions/spillway-relay/invocations Event" ||
			wakes[0].Trigger != "wake" || !slices.Equal(wakes[0].Buckets, []int{m.Bucket()}) {
			t.Fatalf("invokes %v with %+v; want one Event invoke of spillway-relay for bucket %d", invokes, wakes, m.Bucket())
		}
	})
}
