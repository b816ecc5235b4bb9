package lease

import (
	"context"
	"time"
)

// Renew is the relay's renewal during a slow publish, at now over io: one
// conditional write per bucket (OpRenew, the new expiry now plus the lease
// duration) and, when every one was accepted, the heartbeat (a refused
// heartbeat is ignored: a relay that lost a bucket must not look alive on
// the strength of a renewal). It reports false when any renewal was
// refused or a bucket is outside [0, BucketCount), then without a request;
// an empty list reports true without a request. An error other than a
// refusal fails the renewal.
func Renew(ctx context.Context, io IO, now time.Time, req Request, buckets []int) (bool, error) {
	if len(buckets) == 0 {
		return true, nil
	}
	for _, b := range buckets {
		if b < 0 || b >= req.BucketCount {
			return false, nil
		}
	}
	t := Ticks(now)
	at, expiry := TimeFromTicks(t), TimeFromTicks(t+durationTicks(req.LeaseDuration))
	writes := make([]Write, len(buckets))
	for i, b := range buckets {
		writes[i] = Write{Bucket: b, Now: at, Expiry: expiry}
	}
	_, refused, err := io.WriteLeases(ctx, req.RelayID, OpRenew, writes)
	if err != nil || len(refused) > 0 {
		return false, err
	}
	if _, err := io.Heartbeat(ctx, req.RelayID, at, req.KeepsAhead()); err != nil {
		return false, err
	}
	return true, nil
}
