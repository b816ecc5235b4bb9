package lease

import (
	"slices"
	"unicode/utf8"
)

// FairShare is how many buckets each relay of a fleet should hold and which
// contiguous range each is assigned. Relays that read the same membership and
// the same held counts compute the same FairShare, which is what lets them
// plan without talking to each other.
type FairShare struct {
	// Relays lists the relay ids in ordinal order; an id's index is its rank.
	Relays []string
	// Shares[k] is the number of buckets Relays[k] should hold.
	Shares []int
	// Starts[k] is the first bucket of Relays[k]'s assigned range
	// [Starts[k], Starts[k]+Shares[k]). Ranges are disjoint and, in rank
	// order, cover [0, bucketCount).
	Starts []int
}

// FairShares splits bucketCount buckets among the active relays plus the
// requester (added if missing, ignored if empty; duplicates count once).
//
// held maps a relay id to the number of leases the caller sees it holding;
// entries for relays outside the fleet are ignored and a nil map means
// nothing is held. Ids are ranked in ordinal order (UTF-16 code units, as
// .NET's StringComparer.Ordinal, which is byte order for the ASCII ids
// ValidateRelayID admits). Every relay gets bucketCount / R (R relays); the
// remainder goes one each, in rank order, first to relays holding more than
// that floor, then to relays still at the floor. Giving the remainder to the
// holders first means a relay moving towards its share never changes a
// peer's share, so relays reading at different moments of a rebalance agree.
//
// Errors are misconfigurations: bucketCount < 1, an empty id in active, or no
// relay at all.
func FairShares(bucketCount int, active []string, requester string, held map[string]int) (FairShare, error) {
	const op = "fair shares"
	if bucketCount < 1 {
		return FairShare{}, Misconfigured(op, "bucket count %d, want >= 1", bucketCount)
	}
	relays := make([]string, 0, len(active)+1)
	for _, id := range active {
		if id == "" {
			return FairShare{}, Misconfigured(op, "active relay list holds an empty id")
		}
		relays = append(relays, id)
	}
	if requester != "" {
		relays = append(relays, requester)
	}
	if len(relays) == 0 {
		return FairShare{}, Misconfigured(op, "no relay to share %d buckets among", bucketCount)
	}
	slices.SortFunc(relays, compareOrdinal)
	relays = slices.Compact(relays)

	r := len(relays)
	floor, remainder := bucketCount/r, bucketCount%r
	shares := make([]int, r)
	for k := range shares {
		shares[k] = floor
	}
	for k := 0; k < r && remainder > 0; k++ {
		if held[relays[k]] > floor {
			shares[k]++
			remainder--
		}
	}
	for k := 0; k < r && remainder > 0; k++ {
		if shares[k] == floor {
			shares[k]++
			remainder--
		}
	}
	starts := make([]int, r)
	for k := 1; k < r; k++ {
		starts[k] = starts[k-1] + shares[k-1]
	}
	return FairShare{Relays: relays, Shares: shares, Starts: starts}, nil
}

// Rank returns id's position in Relays, or -1 when id is not in the fleet.
func (f FairShare) Rank(id string) int {
	k, found := slices.BinarySearchFunc(f.Relays, id, compareOrdinal)
	if !found {
		return -1
	}
	return k
}

// Share returns id's share; 0 when id is not in the fleet.
func (f FairShare) Share(id string) int {
	if k := f.Rank(id); k >= 0 {
		return f.Shares[k]
	}
	return 0
}

// Range returns id's assigned buckets [start, end); empty (start == end) for
// a relay without a share or outside the fleet.
func (f FairShare) Range(id string) (start, end int) {
	k := f.Rank(id)
	if k < 0 {
		return 0, 0
	}
	return f.Starts[k], f.Starts[k] + f.Shares[k]
}

// StandbyRank returns -1 when id has a share; otherwise id's 0-based place in
// the standby queue, the number of lower-ranked relays also without a share.
// Standby 0 is the first to take a bucket that frees up. A relay outside the
// fleet gets -1.
func (f FairShare) StandbyRank(id string) int {
	k := f.Rank(id)
	if k < 0 || f.Shares[k] > 0 {
		return -1
	}
	n := 0
	for j := range k {
		if f.Shares[j] == 0 {
			n++
		}
	}
	return n
}

// ShareMap returns every relay's share keyed by id.
func (f FairShare) ShareMap() map[string]int {
	m := make(map[string]int, len(f.Relays))
	for k, id := range f.Relays {
		m[id] = f.Shares[k]
	}
	return m
}

// compareOrdinal orders strings by UTF-16 code units, the order .NET relays
// rank by. For valid UTF-8 it differs from byte order only between
// supplementary characters (surrogate pairs, 0xD800-0xDFFF) and BMP
// characters from U+E000 up; for ASCII ids the two are identical. Invalid
// UTF-8 falls back to byte order so the result stays a total order.
func compareOrdinal(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i == len(a) || i == len(b) {
		return len(a) - len(b) // one is a prefix of the other
	}
	if a[i] < utf8.RuneSelf && b[i] < utf8.RuneSelf {
		return int(a[i]) - int(b[i])
	}
	// Back up to the start of the rune the first difference is in.
	for i > 0 && !utf8.RuneStart(a[i]) {
		i--
	}
	ra, sa := utf8.DecodeRuneInString(a[i:])
	rb, sb := utf8.DecodeRuneInString(b[i:])
	if (ra == utf8.RuneError && sa <= 1) || (rb == utf8.RuneError && sb <= 1) {
		return compareBytes(a[i:], b[i:])
	}
	if ua, ub := firstUTF16Unit(ra), firstUTF16Unit(rb); ua != ub {
		return int(ua) - int(ub)
	}
	// Same first unit: both are supplementary with one high surrogate, and
	// the low surrogates order like the code points.
	return int(ra) - int(rb)
}

func firstUTF16Unit(r rune) rune {
	if r < 0x10000 {
		return r
	}
	return 0xD800 + (r-0x10000)>>10
}

func compareBytes(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
