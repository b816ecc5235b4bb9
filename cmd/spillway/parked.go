package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// parkedEnv is the table side every parked command needs.
type parkedEnv struct {
	cfg   outboxlambda.Config
	store *outboxddb.Store
}

func openParked(ctx context.Context, ef *endpointFlags, writes bool, stderr io.Writer) (*parkedEnv, error) {
	cfg, err := ef.config()
	if err != nil {
		return nil, usagef("%v", err)
	}
	client, err := dynamoClient(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := ef.applyLayout(ctx, client, &cfg, writes, stderr); err != nil {
		return nil, err
	}
	opts := cfg.StoreOptions()
	store, err := outboxddb.NewStore(client, opts)
	if err != nil {
		return nil, err
	}
	return &parkedEnv{cfg: cfg, store: store}, nil
}

// parkedView is one parked message as list prints it.
type parkedView struct {
	MessageID     string     `json:"messageId"`
	Bucket        int        `json:"bucket"`
	Sequence      int64      `json:"sequence"`
	Topic         string     `json:"topic"`
	KeyBase64     *string    `json:"keyBase64"`
	Reason        string     `json:"reason"`
	Error         string     `json:"error,omitempty"`
	Attempts      int        `json:"attempts"`
	FirstFailedAt *time.Time `json:"firstFailedAt,omitempty"`
	ParkedAt      time.Time  `json:"parkedAt"`
	// ReplayRequested is set while the message waits for its relay to
	// replay it.
	ReplayRequested *time.Time `json:"replayRequested,omitempty"`
	ReplayTopic     string     `json:"replayTopic,omitempty"`
}

func viewOf(p outboxddb.ParkedMessage) parkedView {
	v := parkedView{MessageID: p.MessageID, Bucket: p.Bucket, Sequence: p.Sequence, Topic: p.Topic,
		Reason: string(p.Reason), Error: p.Error, Attempts: p.Attempts, ParkedAt: p.ParkedAt}
	if p.Key != nil {
		k := base64.StdEncoding.EncodeToString(p.Key)
		v.KeyBase64 = &k
	}
	if !p.FirstFailedAt.IsZero() {
		t := p.FirstFailedAt
		v.FirstFailedAt = &t
	}
	if !p.ReplayRequested.IsZero() {
		t := p.ReplayRequested
		v.ReplayRequested, v.ReplayTopic = &t, p.ReplayTopic
	}
	return v
}

func runParkedList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("parked list", stdout)
	ef := addTableFlags(fs).withOutbox()
	bucket := fs.Int("bucket", -1, "only this bucket (default: every bucket)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	env, err := openParked(ctx, ef, false, stderr)
	if err != nil {
		return err
	}
	var buckets []int
	if *bucket >= 0 {
		if *bucket >= env.cfg.BucketCount {
			return usagef("--bucket %d is outside [0, %d)", *bucket, env.cfg.BucketCount)
		}
		buckets = []int{*bucket}
	}
	parked, err := env.store.ListParked(ctx, buckets...)
	if err != nil {
		return err
	}
	views := make([]parkedView, 0, len(parked))
	for _, p := range parked {
		views = append(views, viewOf(p))
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(views)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MESSAGE ID\tBUCKET\tSEQUENCE\tTOPIC\tKEY\tREASON\tATTEMPTS\tFIRST FAILURE\tPARKED AT")
	for _, p := range parked {
		if !p.ReplayRequested.IsZero() {
			p.Reason += " (replay requested)"
		}
		first := "-"
		if !p.FirstFailedAt.IsZero() {
			first = p.FirstFailedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%d\t%s\t%s\n", p.MessageID, p.Bucket, p.Sequence, p.Topic,
			showKey(p.Key), p.Reason, p.Attempts, first, p.ParkedAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintf(tw, "%d parked\n", len(parked))
	return tw.Flush()
}

// showKey prints a key as quoted text when it is printable UTF-8, else as
// base64 (the form --key-base64 takes), and keyless as "-".
func showKey(k []byte) string {
	if k == nil {
		return "-"
	}
	if utf8.Valid(k) && !bytes.ContainsFunc(k, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(string(k))
	}
	return "base64:" + base64.StdEncoding.EncodeToString(k)
}

func runParkedReplay(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("parked replay", stdout)
	ef := addTableFlags(fs).withOutbox()
	id := fs.String("message-id", "", "replay this message and every parked message of its key, in order")
	keyB64 := fs.String("key-base64", "", "replay every parked message of this key (base64), in order")
	all := fs.Bool("all", false, "replay every parked message")
	topic := fs.String("topic", "", "publish to this topic instead of the stored one")
	yes := fs.Bool("yes", false, "replay (without it: a dry run that lists what would be replayed)")
	function := fs.String("relay-function", "", "wake this relay function (name or ARN) once the messages are marked (env SPILLWAY_RELAY_FUNCTION; none: the relays' schedule finds them)")
	verbose := fs.verbose("log the wake-up's failures")
	if err := parse(fs, args); err != nil {
		return err
	}
	sel, err := replaySelector(*id, *keyB64, *all)
	if err != nil {
		return err
	}
	env, err := openParked(ctx, ef, *yes, stderr)
	if err != nil {
		return err
	}
	parked, err := env.store.ListParked(ctx)
	if err != nil {
		return err
	}
	chosen, err := sel(parked)
	if err != nil {
		return err
	}
	for _, p := range chosen {
		fmt.Fprintf(stdout, "replay %s (bucket %d, sequence %d, %s, key %s)\n", p.MessageID, p.Bucket, p.Sequence, p.Reason, showKey(p.Key))
	}
	if !*yes {
		// A dry run did what was asked: show, and say how to apply it.
		fmt.Fprintf(stdout, "dry run: nothing was replayed; add --yes to replay these %d message(s)\n", len(chosen))
		return nil
	}
	marked, err := env.store.RequestReplay(ctx, chosen, *topic)
	fmt.Fprintf(stdout, "marked %d of %d message(s) for replay; the relay holding each bucket publishes them, each key's in order and before the key's later messages, then deletes them\n", marked, len(chosen))
	if err != nil {
		return fmt.Errorf("%w; what is marked stays marked: run the same replay again to mark the rest", err)
	}
	if fn := cmp.Or(*function, env.cfg.RelayFunction); fn != "" && marked > 0 {
		wakeForReplay(ctx, fn, chosen, stdout, cliLogger(stderr, *verbose))
	}
	return nil
}

// replaySelector turns exactly one of the replay flags into a filter over
// the parked messages, listed bucket by bucket in original order.
func replaySelector(id, keyB64 string, all bool) (func([]outboxddb.ParkedMessage) ([]outboxddb.ParkedMessage, error), error) {
	set := 0
	for _, b := range []bool{id != "", keyB64 != "", all} {
		if b {
			set++
		}
	}
	if set != 1 {
		return nil, usagef("give exactly one of --message-id, --key-base64 and --all")
	}
	switch {
	case all:
		return func(ps []outboxddb.ParkedMessage) ([]outboxddb.ParkedMessage, error) {
			if len(ps) == 0 {
				return nil, errors.New("nothing is parked")
			}
			return ps, nil
		}, nil
	case keyB64 != "":
		key, err := base64.StdEncoding.DecodeString(keyB64)
		if err != nil {
			return nil, usagef("--key-base64 %q: %v", keyB64, err)
		}
		return func(ps []outboxddb.ParkedMessage) ([]outboxddb.ParkedMessage, error) {
			out := ofKey(ps, key, -1)
			if len(out) == 0 {
				return nil, fmt.Errorf("no parked message has key base64:%s", keyB64)
			}
			return out, nil
		}, nil
	}
	if _, err := outbox.ParseMessageID(id); err != nil {
		return nil, usagef("--message-id %q is not a message id", id)
	}
	return func(ps []outboxddb.ParkedMessage) ([]outboxddb.ParkedMessage, error) {
		p, err := findParked(ps, id)
		if err != nil {
			return nil, err
		}
		if p.Key == nil {
			return []outboxddb.ParkedMessage{p}, nil
		}
		// The key is quarantined as a whole: its messages go back together,
		// in order, or the later ones would only be parked again.
		return ofKey(ps, p.Key, p.Bucket), nil
	}, nil
}

// ofKey returns the parked messages of key (in bucket, or any bucket when
// bucket < 0), in list order.
func ofKey(ps []outboxddb.ParkedMessage, key []byte, bucket int) []outboxddb.ParkedMessage {
	var out []outboxddb.ParkedMessage
	for _, p := range ps {
		if p.Key != nil && bytes.Equal(p.Key, key) && (bucket < 0 || p.Bucket == bucket) {
			out = append(out, p)
		}
	}
	return out
}

func findParked(ps []outboxddb.ParkedMessage, id string) (outboxddb.ParkedMessage, error) {
	for _, p := range ps {
		if strings.EqualFold(p.MessageID, id) {
			return p, nil
		}
	}
	return outboxddb.ParkedMessage{}, fmt.Errorf("no parked message has id %s (spillway parked list shows what is parked)", id)
}

func runParkedDrop(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("parked drop", stdout)
	ef := addTableFlags(fs).withOutbox()
	id := fs.String("message-id", "", "the parked message to delete for good")
	yes := fs.Bool("yes", false, "do it")
	if err := parse(fs, args); err != nil {
		return err
	}
	if _, err := outbox.ParseMessageID(*id); err != nil {
		return usagef("--message-id %q is not a message id", *id)
	}
	if !*yes {
		return usagef("dropping deletes the message for good: add --yes")
	}
	env, err := openParked(ctx, ef, true, stderr)
	if err != nil {
		return err
	}
	parked, err := env.store.ListParked(ctx)
	if err != nil {
		return err
	}
	p, err := findParked(parked, *id)
	if err != nil {
		return err
	}
	if err := env.store.DropParked(ctx, p); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "dropped %s (bucket %d, sequence %d, topic %s, key %s)\n", p.MessageID, p.Bucket, p.Sequence, p.Topic, showKey(p.Key))
	return nil
}
