package outboxddb

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
)

type recordingNotifier struct {
	mu    sync.Mutex
	wakes []outbox.WakeUp
	err   error
}

func (n *recordingNotifier) Notify(_ context.Context, w outbox.WakeUp) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.wakes = append(n.wakes, w)
	return n.err
}

func (n *recordingNotifier) got() []outbox.WakeUp {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.wakes)
}

// reason is a cancellation reason with the stored item's MessageId.
func reason(code, storedID string) types.CancellationReason {
	r := types.CancellationReason{Code: aws.String(code)}
	if storedID != "" {
		r.Item = item{"MessageId": S(storedID)}
	}
	return r
}

func TestWriterUnit(t *testing.T) {
	t.Run("EnqueueBatch_OwnRetryDetection", func(t *testing.T) {
		a, b := testMessage(t, 1, "a"), testMessage(t, 1, "b")
		b.ID = outbox.NewMessageID()
		foreign := outbox.NewMessageID().String()
		// A writer in another language may have stored another GUID spelling:
		// ids compare parsed.
		braced := "{" + strings.ToUpper(b.ID.String()) + "}"
		for name, c := range map[string]struct {
			reasons []types.CancellationReason
			own     bool
		}{
			"every item refused by itself":     {[]types.CancellationReason{reason("ConditionalCheckFailed", a.ID.String()), reason("ConditionalCheckFailed", braced)}, true},
			"one item holds a foreign message": {[]types.CancellationReason{reason("ConditionalCheckFailed", a.ID.String()), reason("ConditionalCheckFailed", foreign)}, false},
			"another reason":                   {[]types.CancellationReason{reason("ConditionalCheckFailed", a.ID.String()), reason("ThrottlingError", "")}, false},
			"partly refused":                   {[]types.CancellationReason{reason("ConditionalCheckFailed", a.ID.String()), reason("None", "")}, false},
			"refused without the stored item":  {[]types.CancellationReason{reason("ConditionalCheckFailed", ""), reason("ConditionalCheckFailed", "")}, false},
			"fewer reasons than items":         {[]types.CancellationReason{reason("ConditionalCheckFailed", a.ID.String())}, false},
		} {
			t.Run(name, func(t *testing.T) {
				notifier := &recordingNotifier{}
				f := &fakeDB{update: counterAt(map[string]int64{})}
				f.transact = func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
					return nil, &types.TransactionCanceledException{Message: aws.String("cancelled"), CancellationReasons: c.reasons}
				}
				w := writerOn(t, f, WriterOptions{Notifier: notifier})
				stored, err := w.EnqueueBatch(context.Background(), []outbox.Message{a, b})
				if c.own {
					if err != nil || len(stored) != 2 || len(notifier.got()) != 1 {
						t.Fatalf("own retry: %v, %d stored, %d wake-ups", err, len(stored), len(notifier.got()))
					}
					return
				}
				var tce *types.TransactionCanceledException
				if err == nil || !errors.As(err, &tce) || len(notifier.got()) != 0 {
					t.Fatalf("foreign refusal: %v, %d wake-ups; want the cancellation and no wake-up", err, len(notifier.got()))
				}
				var taken *SequenceTakenError
				if name == "one item holds a foreign message" && (!errors.As(err, &taken) || taken.HeldBy.String() != foreign || taken.MessageID != b.ID) {
					// The item held by another message is the one reported.
					t.Fatalf("foreign message: %v", err)
				}
			})
		}
	})

	t.Run("Enqueue_RefusalByItsOwnMessage_IsASuccess_ByAnotherIsATakenSequence", func(t *testing.T) {
		m := testMessage(t, 2, "k")
		for name, c := range map[string]struct {
			stored item
			own    bool
		}{
			"own message, same spelling":    {item{"MessageId": S(m.ID.String())}, true},
			"own message, another spelling": {item{"MessageId": S(strings.ReplaceAll(strings.ToUpper(m.ID.String()), "-", ""))}, true},
			"another message":               {item{"MessageId": S(outbox.NewMessageID().String())}, false},
			"no stored item returned":       {nil, false},
		} {
			t.Run(name, func(t *testing.T) {
				notifier := &recordingNotifier{}
				f := &fakeDB{update: counterAt(map[string]int64{"OUTBOX#SEQUENCE#2": 6})}
				f.put = func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
					return nil, &types.ConditionalCheckFailedException{Message: aws.String("refused"), Item: c.stored}
				}
				w := writerOn(t, f, WriterOptions{Notifier: notifier})
				stored, err := w.Enqueue(context.Background(), m)
				if c.own {
					if err != nil || stored.Sequence() != 7 || len(notifier.got()) != 1 {
						t.Fatalf("own retry: %+v, %v, %d wake-ups", stored, err, len(notifier.got()))
					}
					return
				}
				var taken *SequenceTakenError
				if !errors.As(err, &taken) || taken.Bucket != 2 || taken.Sequence != 7 || taken.MessageID != m.ID || len(notifier.got()) != 0 {
					t.Fatalf("refusal by another message: %v, %d wake-ups", err, len(notifier.got()))
				}
				var ccf *types.ConditionalCheckFailedException
				if !errors.As(err, &ccf) {
					t.Fatal("the taken-sequence error does not unwrap to the DynamoDB error")
				}
			})
		}
	})

	t.Run("Notify_SendsTheDistinctBuckets_AndNeverFails", func(t *testing.T) {
		notifier := &recordingNotifier{}
		w := writerOn(t, &fakeDB{}, WriterOptions{Notifier: notifier})
		stored := func(b int, key string) outbox.Message { return outbox.Stored(testMessage(t, b, key), b, 1) }
		w.notify(context.Background(), stored(5, "a"), stored(1, "b"), stored(5, "c"))
		w.notify(context.Background())
		if got := notifier.got(); len(got) != 1 || !slices.Equal(got[0].Buckets, []int{1, 5}) || got[0].Hop != 0 || got[0].Join {
			t.Fatalf("wake-ups %+v, want one for buckets [1 5]", got)
		}

		var logs bytes.Buffer
		failing := &recordingNotifier{err: errors.New("invoke refused")}
		w = writerOn(t, &fakeDB{}, WriterOptions{Notifier: failing, Options: Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))}})
		w.notify(context.Background(), testMessage(t, 3, "a"))
		if len(failing.got()) != 1 || !strings.Contains(logs.String(), "invoke refused") {
			t.Fatalf("failed wake-up not logged: %q", logs.String())
		}

		// Without a notifier: nothing, and no panic.
		writerOn(t, &fakeDB{}, WriterOptions{}).notify(context.Background(), testMessage(t, 3, "a"))
	})

	t.Run("Enqueue_NotifiesOnlyAfterTheWriteSucceeded", func(t *testing.T) {
		notifier := &recordingNotifier{}
		f := &fakeDB{update: counterAt(map[string]int64{})}
		f.put = func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
			if len(notifier.got()) != 0 {
				t.Error("notified before the write")
			}
			return &dynamodb.PutItemOutput{}, nil
		}
		w := writerOn(t, f, WriterOptions{Notifier: notifier})
		if _, err := w.Enqueue(context.Background(), testMessage(t, 4, "a")); err != nil {
			t.Fatal(err)
		}
		if got := notifier.got(); len(got) != 1 || !slices.Equal(got[0].Buckets, []int{4}) {
			t.Fatalf("wake-ups %+v", got)
		}

		f.put = func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, errors.New("network down") }
		if _, err := w.Enqueue(context.Background(), testMessage(t, 4, "a")); err == nil || !strings.Contains(err.Error(), "network down") {
			t.Fatalf("enqueue = %v", err)
		}
		if len(notifier.got()) != 1 {
			t.Fatal("a failed enqueue notified")
		}
	})

	t.Run("ReservationWithoutSequence_IsAnError", func(t *testing.T) {
		f := &fakeDB{} // answers UpdateItem without attributes
		w := writerOn(t, f, WriterOptions{})
		_, _, err := prepareItem(context.Background(), w, testMessage(t, 1, "a"))
		if err == nil || !strings.Contains(err.Error(), "Sequence") || !strings.Contains(err.Error(), "bucket 1") {
			t.Fatalf("reservation without Sequence: %v", err)
		}
	})

	t.Run("ZeroCreatedAt_IsStampedFromTheClock", func(t *testing.T) {
		f := &fakeDB{update: counterAt(map[string]int64{})}
		w := writerOn(t, f, WriterOptions{})
		m := testMessage(t, 1, "a")
		m.CreatedAt = time.Time{}
		_, got, err := prepareItem(context.Background(), w, m)
		if err != nil || !got.CreatedAt.Equal(t0) {
			t.Fatalf("created %v, %v; want the clock's %v", got.CreatedAt, err, t0)
		}
	})

	t.Run("AllowedTopics_RefuseOthersBeforeAnyRequest", func(t *testing.T) {
		f := &fakeDB{update: counterAt(map[string]int64{})}
		w := writerOn(t, f, WriterOptions{Topics: []string{"payments"}})
		bad := testMessage(t, 1, "a") // topic "orders"
		for name, call := range map[string]func() error{
			"Enqueue":      func() error { _, err := w.Enqueue(context.Background(), bad); return err },
			"EnqueueBatch": func() error { _, err := w.EnqueueBatch(context.Background(), []outbox.Message{bad}); return err },
			"Prepare":      func() error { _, err := w.Prepare(context.Background(), bad); return err },
			// Reported where the build function adds it, before any request.
			"Tx.Enqueue": func() error { return (&Tx{w: w}).Enqueue(bad) },
			"Commit": func() error {
				_, err := w.Commit(context.Background(), func(_ context.Context, tx *Tx) error { return tx.Enqueue(bad) })
				return err
			},
		} {
			err := call()
			if !errors.Is(err, outbox.ErrInvalidMessage) || !strings.Contains(err.Error(), `"orders"`) || !strings.Contains(err.Error(), "payments") {
				t.Errorf("%s: %v, want an invalid message naming the topic and the allowed ones", name, err)
			}
		}
		wantOps(t, f)
		ok := testMessage(t, 1, "a")
		ok.Topic = "payments"
		if _, _, err := prepareItem(context.Background(), w, ok); err != nil {
			t.Fatalf("an allowed topic: %v", err)
		}
		if _, err := NewWriter(f, WriterOptions{Options: Options{TableName: "outbox"}, Topics: []string{" "}}); !errors.Is(err, outbox.ErrMisconfigured) {
			t.Fatalf("a blank allowed topic: %v, want a misconfiguration", err)
		}
	})
}
