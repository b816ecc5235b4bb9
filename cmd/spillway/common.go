package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// bucketCountFlag registers --bucket-count (and its synonym --count) with
// the default from SPILLWAY_BUCKET_COUNT, else 8.
func bucketCountFlag(fs *flag.FlagSet) *int {
	def := outbox.DefaultBucketCount
	if v, err := strconv.Atoi(os.Getenv(outboxconf.EnvBucketCount)); err == nil && v > 0 {
		def = v
	}
	n := fs.Int("bucket-count", def, fmt.Sprintf("number of buckets (env %s)", outboxconf.EnvBucketCount))
	fs.Var(intAlias{n}, "count", "synonym of --bucket-count")
	return n
}

// intAlias lets a second flag name set the same int.
type intAlias struct{ p *int }

func (a intAlias) String() string {
	if a.p == nil {
		return ""
	}
	return strconv.Itoa(*a.p)
}

func (a intAlias) Set(s string) error {
	v, err := strconv.Atoi(s)
	if err != nil {
		return err
	}
	*a.p = v
	return nil
}
