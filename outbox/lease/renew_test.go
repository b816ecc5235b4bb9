package lease

import (
	"context"
	"slices"
	"testing"
	"time"
)

// TestRenew: a renewal sends one OpRenew write per bucket expiring a lease
// duration after now and then the heartbeat; a refusal, a bucket outside
// the count or an empty list sends no heartbeat; a failed write fails it.
func TestRenew(t *testing.T) {
	t.Parallel()
	s := time.Second
	req := Request{RelayID: "relay-a", BucketCount: 8, LeaseDuration: 30 * s, RenewInterval: 10 * s}
	for _, c := range []struct {
		name    string
		io      *scriptedIO
		buckets []int
		ok      bool
		err     bool
		calls   []string
	}{
		{"every lease renewed", &scriptedIO{}, []int{2, 5}, true, false,
			[]string{"renew 2", "renew 5", "heartbeat relay-a " + at(0).Format(time.TimeOnly)}},
		{"one refused: no heartbeat", &scriptedIO{refuse: map[int]bool{5: true}}, []int{2, 5}, false, false,
			[]string{"renew 2", "renew 5"}},
		{"a bucket outside the count: no request", &scriptedIO{}, []int{2, 8}, false, false, nil},
		{"nothing to renew: no request", &scriptedIO{}, nil, true, false, nil},
		{"a failed write", &scriptedIO{failOp: OpRenew}, []int{2}, false, true, []string{"renew 2"}},
	} {
		ok, err := Renew(context.Background(), c.io, at(0), req, c.buckets)
		if ok != c.ok || (err != nil) != c.err || !slices.Equal(c.io.calls, c.calls) {
			t.Errorf("%s: %v, %v, calls %q; want %v, error %v, calls %q", c.name, ok, err, c.io.calls, c.ok, c.err, c.calls)
		}
	}
	// The writes carry now and the expiry a lease duration later.
	io := &recordingIO{}
	if _, err := Renew(context.Background(), io, at(1500*time.Millisecond), req, []int{3}); err != nil {
		t.Fatal(err)
	}
	if want := (Write{Bucket: 3, Now: at(1500 * time.Millisecond), Expiry: at(31500 * time.Millisecond)}); len(io.writes) != 1 || io.writes[0] != want || !io.keepsAhead {
		t.Fatalf("writes %+v (keep-ahead mark %v), want %+v with the mark", io.writes, io.keepsAhead, want)
	}
}

// recordingIO accepts everything and records the writes and the mark.
type recordingIO struct {
	scriptedIO
	writes     []Write
	keepsAhead bool
}

func (r *recordingIO) WriteLeases(ctx context.Context, id string, op Op, ws []Write) ([]int, []int, error) {
	r.writes = append(r.writes, ws...)
	return r.scriptedIO.WriteLeases(ctx, id, op, ws)
}

func (r *recordingIO) Heartbeat(ctx context.Context, id string, now time.Time, keepsAhead bool) (bool, error) {
	r.keepsAhead = keepsAhead
	return r.scriptedIO.Heartbeat(ctx, id, now, keepsAhead)
}
