package outboxinbox_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
)

func assertMismatch(t *testing.T, err error, id outbox.MessageID) {
	t.Helper()
	var fe *outboxinbox.FingerprintError
	if !errors.As(err, &fe) || !errors.Is(err, outboxinbox.ErrPayloadMismatch) || fe.MessageID != id.String() || fe.Stored == fe.Received {
		t.Fatalf("err = %v, want a *FingerprintError for %s", err, id)
	}
}

func assertMismatchCount(t *testing.T, c outboxinbox.Counts, n int64) {
	t.Helper()
	if c.Mismatches != n || c.Failures != n || c.Applied != 1 || c.Duplicates != 1 {
		t.Fatalf("counts %+v, want %d mismatches (and failures), 1 applied, 1 duplicate", c, n)
	}
}

// assertDeadLettered checks a dead-letter record: the original headers
// (the id among them), then the error and the attempts.
func assertDeadLettered(t *testing.T, r *kgo.Record, id outbox.MessageID, attempts int) {
	t.Helper()
	hs := map[string]string{}
	for _, h := range r.Headers {
		hs[h.Key] = string(h.Value)
	}
	if hs[outbox.DefaultMessageIDHeaderName] != id.String() || hs[outboxinbox.HeaderAttempts] != strconv.Itoa(attempts) || hs[outboxinbox.HeaderError] == "" {
		t.Fatalf("dead-letter headers %v, want the message id %s, %d attempts and the error", hs, id, attempts)
	}
	t.Logf("dead-lettered: %s=%s, %s: %s", r.Key, r.Value, outboxinbox.HeaderError, hs[outboxinbox.HeaderError])
}

func assertDeadLetteredCount(t *testing.T, c outboxinbox.Counts, n int64) {
	t.Helper()
	if c.DeadLettered != n {
		t.Fatalf("counts %+v, want %d dead-lettered", c, n)
	}
}

func deadLetterAfter(n int) func(*outboxinbox.ConsumerConfig) {
	return func(c *outboxinbox.ConsumerConfig) { c.MaxAttempts = n }
}
