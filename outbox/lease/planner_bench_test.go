package lease

import (
	"fmt"
	"testing"
)

// BenchmarkPlanLeases measures one relay's plan of an acquisition round:
// the default 8 buckets with 4 relays, and a large fleet (256 buckets, 64
// relays) where half the buckets are held, some expired, and the requester
// is new.
func BenchmarkPlanLeases(b *testing.B) {
	for _, c := range []struct{ buckets, relays int }{{8, 4}, {256, 64}} {
		active := make([]string, c.relays)
		for i := range active {
			active[i] = fmt.Sprintf("relay-%03d", i)
		}
		leases := make([]BucketLease, c.buckets)
		for i := range leases {
			if i%2 == 0 {
				leases[i] = BucketLease{Owner: active[(i/2)%len(active)], Expired: i%10 == 0}
			}
		}
		requester := "relay-new"
		b.Run(fmt.Sprintf("%dbuckets-%drelays", c.buckets, c.relays), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := PlanLeases(c.buckets, active, requester, leases); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
