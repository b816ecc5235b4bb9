package outboxddb

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/outbox"
)

func TestFetch_StopsAtAnUnreadableRow_AndReturnsTheValidPrefix(t *testing.T) {
	e := newEnv(t)
	w, s := e.writer(t), e.store(t)
	enqueue(t, w, 2, 3)
	// A row put by hand without a topic, after three good ones, then more.
	if _, err := e.d.Client.PutItem(t.Context(), &dynamodb.PutItemInput{
		TableName: aws.String(e.opts.TableName),
		Item:      item{"PK": S("OUTBOX#MESSAGES#2"), "SK": S("0000000000000000004"), "MessageId": S("5c3e9f10-7b2a-4d6e-8f41-a2b3c4d5e6f7"), "CreatedAtUtc": N("1")},
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.FetchBatch(t.Context(), 2, 10)
	var row *outbox.UnreadableRowError
	if !errors.As(err, &row) || row.Sequence != 4 || row.Bucket != 2 || !errors.Is(err, outbox.ErrInvalidItem) {
		t.Fatalf("fetch error %v, want an unreadable row 4 of bucket 2", err)
	}
	wantInts(t, "prefix", sequences(got), []int64{1, 2, 3})
}

func TestPark_MovesTheRowKeepingEveryAttribute_ThenReplayAndDrop(t *testing.T) {
	e := newEnv(t)
	w, s := e.writer(t), e.store(t, func(o *Options) { o.CountParked = true })
	msgs := enqueue(t, w, 5, 3)
	// Park message 1 as unknown-topic, then message 3 behind it (same key
	// for the test's purpose: quarantine is by key, the store only moves).
	first := outbox.Parking{Bucket: 5, Sequence: 1, Reason: outbox.ParkUnknownTopic, Error: "UNKNOWN_TOPIC_OR_PARTITION", Attempts: 2, FirstFailedAt: t0}
	c := e.counts(func() {
		if err := s.Park(t.Context(), first); err != nil {
			t.Fatal(err)
		}
	})
	// One consistent read of the row and one transaction.
	wantRequests(t, c, map[string]int{"Query": 1, "TransactWriteItems": 1})
	if err := s.Park(t.Context(), outbox.Parking{Bucket: 5, Sequence: 3, Reason: outbox.ParkKeyQuarantined, Behind: 1}); err != nil {
		t.Fatal(err)
	}
	// Behind a parked item that is not there: a conflict, nothing moves.
	if err := s.Park(t.Context(), outbox.Parking{Bucket: 5, Sequence: 2, Reason: outbox.ParkKeyQuarantined, Behind: 9}); !errors.Is(err, outbox.ErrParkConflict) {
		t.Fatalf("park behind a missing item = %v, want a conflict", err)
	}
	// A row that is gone: a conflict.
	if err := s.Park(t.Context(), first); !errors.Is(err, outbox.ErrParkConflict) {
		t.Fatalf("park a parked row again = %v, want a conflict", err)
	}
	left, err := s.FetchBatch(t.Context(), 5, 10)
	if err != nil {
		t.Fatal(err)
	}
	wantInts(t, "left in the bucket", sequences(left), []int64{2})

	var keys map[string][]int64
	c = e.counts(func() {
		if keys, err = s.ParkedKeys(t.Context(), 5); err != nil {
			t.Fatal(err)
		}
	})
	wantRequests(t, c, map[string]int{"Query": 1})
	if len(keys) != 2 || len(keys[string(msgs[0].Key)]) != 1 || keys[string(msgs[2].Key)][0] != 3 {
		t.Fatalf("parked keys %v", keys)
	}
	parked, err := s.ListParked(t.Context(), 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(parked) != 2 || parked[0].MessageID != msgs[0].ID.String() || parked[0].Reason != outbox.ParkUnknownTopic ||
		parked[0].Attempts != 2 || !parked[0].FirstFailedAt.Equal(t0) || parked[0].ParkedAt.IsZero() ||
		parked[0].Error != "UNKNOWN_TOPIC_OR_PARTITION" || string(parked[0].Key) != string(msgs[0].Key) || parked[1].Sequence != 3 {
		t.Fatalf("parked %+v", parked)
	}
	bl, err := s.Backlog(t.Context())
	if err != nil || bl.Parked != 2 || bl.Pending != 1 {
		t.Fatalf("backlog %+v, %v; want 1 pending and 2 parked", bl, err)
	}

	// Replay the first with another topic: same id, headers and payload, a
	// new sequence at the tail, the parked item gone in the same
	// transaction; replaying it again is a conflict, not a copy.
	c = e.counts(func() {
		out, err := w.ReplayParked(t.Context(), parked[:1], "fixed")
		if err != nil || len(out) != 1 || out[0].ID != msgs[0].ID || out[0].Sequence != 4 || out[0].Topic != "fixed" {
			t.Fatalf("replay = %+v, %v", out, err)
		}
	})
	wantRequests(t, c, map[string]int{"UpdateItem": 1, "TransactWriteItems": 1})
	if _, err := w.ReplayParked(t.Context(), parked[:1], ""); !errors.Is(err, outbox.ErrParkConflict) {
		t.Fatalf("second replay = %v, want a conflict", err)
	}
	now, err := s.FetchBatch(t.Context(), 5, 10)
	if err != nil {
		t.Fatal(err)
	}
	wantInts(t, "bucket after replay", sequences(now), []int64{2, 4})
	if now[1].ID != msgs[0].ID || string(now[1].Value) != string(msgs[0].Value) || string(now[1].Headers) != string(msgs[0].Headers) {
		t.Fatalf("replayed %+v, want message 1's id, value and headers", now[1])
	}

	if err := s.DropParked(t.Context(), parked[1]); err != nil {
		t.Fatal(err)
	}
	if err := s.DropParked(t.Context(), parked[1]); !errors.Is(err, outbox.ErrParkConflict) {
		t.Fatalf("second drop = %v, want a conflict", err)
	}
	if rest, err := s.ListParked(t.Context()); err != nil || len(rest) != 0 {
		t.Fatalf("parked after replay and drop: %+v, %v", rest, err)
	}
}

func TestReplay_OfAnUndecodableItem_NamesTheProblem(t *testing.T) {
	e := newEnv(t)
	w, s := e.writer(t), e.store(t)
	if _, err := e.d.Client.PutItem(t.Context(), &dynamodb.PutItemInput{
		TableName: aws.String(e.opts.TableName),
		Item:      item{"PK": S("OUTBOX#MESSAGES#1"), "SK": S("0000000000000000001"), "MessageId": S("5c3e9f10-7b2a-4d6e-8f41-a2b3c4d5e6f7"), "CreatedAtUtc": N("1")},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Park(t.Context(), outbox.Parking{Bucket: 1, Sequence: 1, Reason: outbox.ParkUndecodableItem, Error: "Topic is missing"}); err != nil {
		t.Fatal(err)
	}
	parked, err := s.ListParked(t.Context(), 1)
	if err != nil || len(parked) != 1 {
		t.Fatalf("parked %+v, %v", parked, err)
	}
	if _, err := w.ReplayParked(t.Context(), parked, ""); err == nil || !strings.Contains(err.Error(), "Topic") {
		t.Fatalf("replay without a topic = %v, want the decoder's complaint", err)
	}
	// With a topic the row becomes a message again.
	out, err := w.ReplayParked(t.Context(), parked, "orders")
	if err != nil || len(out) != 1 || out[0].Topic != "orders" {
		t.Fatalf("replay with a topic = %+v, %v", out, err)
	}
}
