package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/spillway-dev/spillway/outbox"
)

func runBucket(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bucket", stdout)
	key := fs.String("key", "", "the message key as UTF-8 text (an empty value is a real, empty key)")
	keyB64 := fs.String("key-base64", "", "the message key as base64 bytes")
	id := fs.String("message-id", "", "the message id of a keyless message")
	partition := fs.Int("partition", -1, "explicit Kafka partition (overrides key and id)")
	count := bucketCountFlag(fs.FlagSet)
	asJSON := fs.Bool("json", false, "print {\"bucket\": B, \"bucketCount\": N}")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *count < 1 {
		return usagef("--bucket-count must be at least 1, got %d", *count)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	given := 0
	for _, n := range []string{"key", "key-base64", "message-id"} {
		if set[n] {
			given++
		}
	}
	if given != 1 && !set["partition"] {
		return usagef("give exactly one of --key, --key-base64 or --message-id (or --partition)")
	}
	var k []byte
	switch {
	case set["key"]:
		k = []byte(*key)
	case set["key-base64"]:
		b, err := base64.StdEncoding.DecodeString(*keyB64)
		if err != nil {
			return usagef("--key-base64: %v", err)
		}
		k = b
	}
	var mid outbox.MessageID
	if set["message-id"] {
		var err error
		if mid, err = outbox.ParseMessageID(*id); err != nil {
			return usagef("--message-id: %v", err)
		}
	}
	var p *int32
	if set["partition"] {
		if *partition < 0 || *partition > 1<<31-1 {
			return usagef("--partition must be between 0 and 2147483647, got %d", *partition)
		}
		v := int32(*partition)
		p = &v
	}
	b, err := outbox.ComputeBucket(k, mid, *count, p)
	if err != nil {
		// The flags were checked above; this is a bug, not the operator's.
		return fmt.Errorf("compute the bucket: %w", err)
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(struct {
			Bucket      int `json:"bucket"`
			BucketCount int `json:"bucketCount"`
		}{b, *count})
	}
	_, err = fmt.Fprintln(stdout, b)
	return err
}
