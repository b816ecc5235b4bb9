package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/lease"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

// drainEnv is a table created and filled through the CLI, and brokers.
type drainEnv struct {
	ddb     *outboxlocal.DynamoDB
	kafka   *outboxlocal.Kafka
	flags   []string
	table   string
	brokers string
}

func newDrainEnv(t *testing.T) *drainEnv {
	t.Helper()
	ddb := outboxtest.NewDynamoDB(t)
	if ddb.External {
		t.Skip("the CLI tests create their table through the CLI; external endpoints are covered by the store tests")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_PROFILE", "")
	e := &drainEnv{ddb: ddb, kafka: outboxtest.NewKafka(t, "orders", "payments"), table: ddb.NewTableName()}
	e.flags = []string{"--dynamodb-endpoint", ddb.Endpoint, "--table", e.table}
	e.brokers = strings.Join(e.kafka.Brokers, ",")
	if code, out, errs := cli(t, append([]string{"create-table"}, e.flags...)...); code != 0 {
		t.Fatalf("create-table: exit %d: %s %s", code, out, errs)
	}
	return e
}

func (e *drainEnv) enqueue(t *testing.T) {
	t.Helper()
	if code, out, errs := cli(t, append([]string{"enqueue", "--file", filepath.Join("..", "..", "events", "enqueue.batch.json")}, e.flags...)...); code != 0 {
		t.Fatalf("enqueue: exit %d: %s %s", code, out, errs)
	}
}

func (e *drainEnv) store(t *testing.T, relayID string) *outboxddb.Store {
	t.Helper()
	s, err := outboxddb.NewStore(e.ddb.Client, outboxddb.StoreOptions{Options: outboxddb.Options{TableName: e.table}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestDrain(t *testing.T) {
	// A relay that died holding every bucket leaves leases that look live until
	// they expire. A drain asked to empty the outbox keeps trying until then,
	// says who holds what, and finishes.
	t.Run("WaitsOutADeadRelaysLeases_AndReportsTheHolder", func(t *testing.T) {
		e := newDrainEnv(t)
		e.enqueue(t)
		t.Setenv(outboxconf.EnvLeaseDuration, "3s")
		t.Setenv(outboxconf.EnvLeaseRenewInterval, "1s")
		// Each run gives up 300 ms after it found nothing it could take, well
		// before the dead relay's leases expire, so the drain runs again and
		// reports them.
		t.Setenv(outboxconf.EnvIdleTimeout, "300ms")
		dead := e.store(t, "dead")
		acq, err := lease.AcquireRound(t.Context(), dead, nil, time.Now(), lease.Request{RelayID: "dead-relay", BucketCount: 8, LeaseDuration: 4 * time.Second}, lease.RoundState{})
		if err != nil || len(acq.Owned) != 8 {
			t.Fatalf("the dead relay holds %v, %v; want every bucket", acq.Owned, err)
		}
		code, out, errs := cli(t, append([]string{"drain", "--brokers", e.brokers, "--timeout", "60s", "--progress", "200ms", "--retry", "200ms"}, e.flags...)...)
		if code != 0 || !strings.Contains(out, "0 pending") {
			t.Fatalf("drain: exit %d:\n%s\n%s", code, out, errs)
		}
		if !strings.Contains(out, "held by dead-relay") {
			t.Errorf("the drain did not report the dead relay's leases:\n%s", out)
		}
		// Progress comes from what the relays publish, as they publish: a
		// progress line before the summary already counts the five messages.
		if !strings.Contains(out, "published 5  pending ~0") {
			t.Errorf("no progress line counted the published messages:\n%s", out)
		}
	})

	// A table that does not exist fails the drain at once, not at its timeout.
	t.Run("MissingTable_FailsAtOnce", func(t *testing.T) {
		e := newDrainEnv(t)
		flags := []string{"--dynamodb-endpoint", e.ddb.Endpoint, "--table", "nosuch"}
		done := make(chan struct{})
		var (
			code int
			errs string
		)
		go func() {
			defer close(done)
			code, _, errs = cli(t, append([]string{"drain", "--brokers", e.brokers, "--timeout", "10m"}, flags...)...)
		}()
		select {
		case <-done:
		case <-time.After(2 * time.Minute):
			t.Fatal("drain --table nosuch still running after 2 minutes of a 10-minute timeout")
		}
		if code != 1 || !strings.Contains(errs, "table nosuch not found") {
			t.Fatalf("exit %d, stderr %q; want 1 naming the missing table", code, errs)
		}
	})

	// A table that never reports ACTIVE: create-table says what it waits for
	// and gives up at --wait.
	t.Run("CreateTable_TableThatNeverBecomesActive_GivesUpAtTheWait", func(t *testing.T) {
		var describes atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			switch target := r.Header.Get("X-Amz-Target"); {
			case strings.HasSuffix(target, ".CreateTable"):
				io.WriteString(w, `{"TableDescription":{"TableName":"slow","TableStatus":"CREATING"}}`)
			case strings.HasSuffix(target, ".DescribeTable"):
				describes.Add(1)
				io.WriteString(w, `{"Table":{"TableName":"slow","TableStatus":"CREATING"}}`)
			default:
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"__type":"com.amazonaws.dynamodb.v20120810#ValidationException","message":"unexpected"}`)
			}
		}))
		defer srv.Close()
		t.Setenv("AWS_ACCESS_KEY_ID", "")
		t.Setenv("AWS_PROFILE", "")
		code, out, errs := cli(t, "create-table", "--dynamodb-endpoint", srv.URL, "--table", "slow", "--wait", "3s", "--progress", "500ms")
		if code != 1 || !strings.Contains(errs, "not active after 3s") {
			t.Fatalf("exit %d, stderr %q; want 1 saying the table is not active after the wait", code, errs)
		}
		if !strings.Contains(out, "waiting for table slow to become ACTIVE (status CREATING)") {
			t.Errorf("no progress line:\n%s", out)
		}
		if describes.Load() == 0 {
			t.Error("the table's status was never read")
		}
	})

	// On a table without a layout record, status with a smaller count than
	// the one in use warns about the messages beyond it and the lease items
	// beyond it, one sentence each, every list once.
	t.Run("Status_WithAnotherBucketCount_Warns", func(t *testing.T) {
		e := newDrainEnv(t)
		e.enqueue(t)
		deleteLayout(t, e.ddb, e.table)
		s := e.store(t, "peer")
		acq, err := lease.AcquireRound(t.Context(), s, nil, time.Now(), lease.Request{RelayID: "peer-relay", BucketCount: 8, LeaseDuration: time.Minute}, lease.RoundState{})
		if err != nil || len(acq.Owned) != 8 {
			t.Fatalf("peer holds %v, %v", acq.Owned, err)
		}
		var st statusView
		code, out, errs := cli(t, append([]string{"status", "--json", "--bucket-count", "7"}, e.flags...)...)
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("status: exit %d: %s %s", code, out, errs)
		}
		all := strings.Join(st.Warnings, "\n")
		for _, want := range []string{"has no layout record", "lease items of buckets [7] lie beyond the bucket count 7", "a relay with a larger count holds [7] now",
			"beyond the bucket count 7, where no relay reads them"} {
			if !strings.Contains(all, want) {
				t.Errorf("warnings %q lack %q", st.Warnings, want)
			}
		}
		if st.Layout != nil || st.BucketCount != 7 || !slices.Equal(st.StaleLeases, []int{7}) {
			t.Errorf("layout %+v, count %d, stale leases %v; want no record, 7 and [7]", st.Layout, st.BucketCount, st.StaleLeases)
		}
		if !strings.Contains(errs, "level=WARN") {
			t.Errorf("the warnings were not logged: %q", errs)
		}
		// With the table's count only the missing record is left to say.
		st = statusView{}
		code, out, _ = cli(t, append([]string{"status", "--json"}, e.flags...)...)
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil || len(st.Warnings) != 1 || st.Stranded != 0 {
			t.Fatalf("status with the right count: exit %d, warnings %q", code, st.Warnings)
		}
	})

	// A head message that cannot be published (its topic does not exist) holds
	// its bucket under the block policy. The drain times out and names that
	// message's bucket and error, not the leases.
	t.Run("StuckOnAPoisonHead_NamesTheBucketAndTheError", func(t *testing.T) {
		e := newDrainEnv(t)
		w, err := outboxddb.NewWriter(e.ddb.Client, outboxddb.WriterOptions{Options: outboxddb.Options{TableName: e.table}})
		if err != nil {
			t.Fatal(err)
		}
		m, err := outbox.NewMessage("no-such-topic", []byte("k"), []byte("v"), outbox.MessageOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if m, err = w.Enqueue(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		code, out, errs := cli(t, append([]string{"drain", "--brokers", e.brokers, "--timeout", "6s", "--progress", "500ms", "--json"}, e.flags...)...)
		var res drainResult
		if code != 1 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("drain: exit %d, stdout %q, stderr %s; want 1 and JSON", code, out, errs)
		}
		if res.Pending != 1 || len(res.Stuck) != 1 || res.Stuck[0].Bucket != m.Bucket() || res.Stuck[0].Error == "" {
			t.Fatalf("result %+v; want 1 pending, stuck on bucket %d with its error", res, m.Bucket())
		}
		want := fmt.Sprintf("bucket %d is stuck on its head message: ", m.Bucket())
		if !strings.Contains(errs, want) || strings.Contains(errs, "no live lease") {
			t.Errorf("stderr does not name the stuck head (%q) or blames the leases:\n%s", want, errs)
		}
		if n := strings.Count(errs, "published 0  pending ~1"); n != 1 {
			t.Errorf("the unchanged progress line was printed %d times, want once:\n%s", n, errs)
		}
	})

	// drain --json reports what its process held at its peak, and --memory-mb
	// sets Go's soft memory limit as a relay function of that size has it.
	t.Run("ReportsItsMemory", func(t *testing.T) {
		t.Setenv("GOMEMLIMIT", "") // set, it would win
		before := debug.SetMemoryLimit(-1)
		t.Cleanup(func() { debug.SetMemoryLimit(before) })
		e := newDrainEnv(t)
		e.enqueue(t)
		code, out, errs := cli(t, append([]string{"drain", "--brokers", e.brokers, "--timeout", "20s", "--progress", "0", "--memory-mb", "128", "--json"}, e.flags...)...)
		var res drainResult
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil {
			t.Fatalf("drain: exit %d: %s %s", code, out, errs)
		}
		m := res.Memory
		if res.Published < 1 || m.PeakHeldMessages < 1 || m.PeakHeldMessages > res.Published || m.PeakHeapBytes == 0 {
			t.Errorf("drain %+v: want the messages held at once within those published, and a heap", res)
		}
		if _, err := os.Stat("/proc/self/status"); err == nil && m.PeakRSSKB <= 0 {
			t.Errorf("drain %+v: no peak RSS with /proc", res)
		}
		if got, want := debug.SetMemoryLimit(-1), outbox.MemoryBudgetFor(128<<20).SoftLimit; got != want {
			t.Errorf("soft memory limit %d, want %d", got, want)
		}
	})
}
