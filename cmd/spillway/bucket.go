package main

import (
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"

	"github.com/spillway-dev/spillway/outbox"
)

func runBucket(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("bucket", "bucket (--key K | --key-base64 B | --message-id UUID) [--partition P] [--bucket-count N]", stderr)
	key := fs.String("key", "", "the message key as UTF-8 text (an empty value is a real, empty key)")
	keyB64 := fs.String("key-base64", "", "the message key as base64 bytes")
	id := fs.String("message-id", "", "the message id of a keyless message")
	partition := fs.Int("partition", -1, "explicit Kafka partition (overrides key and id)")
	count := bucketCountFlag(fs)
	if err := parse(fs, args); err != nil {
		return err
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
		return usagef("%v", err)
	}
	_, err = fmt.Fprintln(stdout, b)
	return err
}
