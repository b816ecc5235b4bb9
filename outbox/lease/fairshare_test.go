package lease

import (
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
)

type rangeOf struct{ start, end int }

func TestFairShares(t *testing.T) {
	t.Parallel()
	t.Run("WorkedExamples", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			name      string
			n         int
			active    []string
			requester string
			held      map[string]int
			relays    []string
			shares    []int
			ranges    map[string]rangeOf
			standby   map[string]int
		}{
			{
				name: "F1 no held: lowest ranks get the remainder", n: 8, active: []string{"c", "a", "b"},
				relays: []string{"a", "b", "c"}, shares: []int{3, 3, 2},
				ranges: map[string]rangeOf{"a": {0, 3}, "b": {3, 6}, "c": {6, 8}},
			},
			{
				name: "F2 requester not yet active is ranked with the others", n: 4, active: []string{"a", "c"}, requester: "b",
				relays: []string{"a", "b", "c"}, shares: []int{2, 1, 1},
				ranges: map[string]rangeOf{"a": {0, 2}, "b": {2, 3}, "c": {3, 4}},
			},
			{
				name: "F3 more relays than buckets: the holders keep the share", n: 2, active: []string{"a", "b", "x", "y"},
				held:   map[string]int{"x": 1, "y": 1},
				relays: []string{"a", "b", "x", "y"}, shares: []int{0, 0, 1, 1},
				ranges:  map[string]rangeOf{"a": {0, 0}, "b": {0, 0}, "x": {0, 1}, "y": {1, 2}},
				standby: map[string]int{"a": 0, "b": 1, "x": -1, "y": -1},
			},
			{
				name: "F4 remainder stays with the relays holding more than the floor", n: 10, active: []string{"a", "b", "c", "d"},
				held:   map[string]int{"a": 2, "b": 0, "c": 3, "d": 5},
				relays: []string{"a", "b", "c", "d"}, shares: []int{2, 2, 3, 3},
				ranges: map[string]rangeOf{"a": {0, 2}, "b": {2, 4}, "c": {4, 7}, "d": {7, 10}},
			},
			{
				name: "F5 standby ranks count the relays without a share in id order", n: 2, active: []string{"a", "m", "b", "n", "c"},
				held:   map[string]int{"m": 1, "n": 1},
				relays: []string{"a", "b", "c", "m", "n"}, shares: []int{0, 0, 0, 1, 1},
				standby: map[string]int{"m": -1, "n": -1, "a": 0, "b": 1, "c": 2},
			},
			{
				name: "F5 with 8 buckets c has a share", n: 8, active: []string{"a", "m", "b", "n", "c"},
				held:   map[string]int{"m": 1, "n": 1},
				relays: []string{"a", "b", "c", "m", "n"}, shares: []int{2, 2, 2, 1, 1},
				standby: map[string]int{"a": -1, "b": -1, "c": -1, "m": -1, "n": -1},
			},
			{
				name: "held of relays outside the fleet is ignored", n: 3, active: []string{"a", "b"},
				held:   map[string]int{"gone": 3, "b": 2},
				relays: []string{"a", "b"}, shares: []int{1, 2},
			},
			{
				name: "duplicates and the requester listed again count once", n: 5, active: []string{"b", "a", "b"}, requester: "a",
				relays: []string{"a", "b"}, shares: []int{3, 2},
			},
			{
				name: "first pass stops when the remainder runs out", n: 7, active: []string{"a", "b", "c", "d"},
				held:   map[string]int{"a": 2, "b": 2, "c": 2},
				relays: []string{"a", "b", "c", "d"}, shares: []int{2, 2, 2, 1},
			},
		} {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				fs, err := FairShares(c.n, c.active, c.requester, c.held)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(fs.Relays, c.relays) || !slices.Equal(fs.Shares, c.shares) {
					t.Fatalf("relays %v shares %v; want %v %v", fs.Relays, fs.Shares, c.relays, c.shares)
				}
				for id, r := range c.ranges {
					if s, e := fs.Range(id); s != r.start || e != r.end {
						t.Errorf("Range(%s) = [%d,%d), want [%d,%d)", id, s, e, r.start, r.end)
					}
				}
				for id, want := range c.standby {
					if got := fs.StandbyRank(id); got != want {
						t.Errorf("StandbyRank(%s) = %d, want %d", id, got, want)
					}
				}
				checkPartition(t, fs, c.n)
			})
		}
	})

	t.Run("AgreeingRelaysPartitionEveryBucket", func(t *testing.T) {
		t.Parallel()
		for _, c := range [][2]int{{1, 1}, {8, 1}, {8, 2}, {8, 3}, {7, 4}, {3, 5}} {
			n, r := c[0], c[1]
			var ids []string
			for i := range r {
				ids = append(ids, fmt.Sprintf("relay-%d", i))
			}
			// Every relay computes the split as requester; all must agree.
			var first FairShare
			for i, id := range ids {
				fs, err := FairShares(n, ids, id, nil)
				if err != nil {
					t.Fatal(err)
				}
				checkPartition(t, fs, n)
				for k := range fs.Shares {
					if want := n/r + boolInt(k < n%r); fs.Shares[k] != want {
						t.Fatalf("n=%d r=%d: rank %d share %d, want %d", n, r, k, fs.Shares[k], want)
					}
				}
				if i == 0 {
					first = fs
				} else if !slices.Equal(fs.Shares, first.Shares) || !slices.Equal(fs.Starts, first.Starts) {
					t.Fatalf("n=%d r=%d: %s disagrees with %s", n, r, id, ids[0])
				}
			}
		}
	})

	t.Run("FreeBucketGoesToTheFirstRelayHoldingNothing", func(t *testing.T) {
		t.Parallel()
		// 4 buckets, 6 relays, 3 holders: the fourth bucket's share goes to the
		// lowest-ranked relay at the floor, not to a holder.
		fs, err := FairShares(4, []string{"m", "n", "p", "q", "a", "z"}, "", map[string]int{"m": 1, "n": 1, "p": 1})
		if err != nil {
			t.Fatal(err)
		}
		if got := fs.ShareMap(); !maps.Equal(got, map[string]int{"a": 1, "m": 1, "n": 1, "p": 1, "q": 0, "z": 0}) {
			t.Fatalf("shares %v", got)
		}
		if fs.StandbyRank("q") != 0 || fs.StandbyRank("z") != 1 || fs.StandbyRank("a") != -1 {
			t.Fatalf("standby ranks q=%d z=%d a=%d", fs.StandbyRank("q"), fs.StandbyRank("z"), fs.StandbyRank("a"))
		}
	})

	// SharesStayPutWhilePeersMoveTowardsThem checks the property
	// the planner relies on: when a relay moves its held count towards its share
	// (releasing surplus or claiming deficit), no relay's share changes, so
	// relays that read the fleet at different moments of a rebalance agree.
	t.Run("SharesStayPutWhilePeersMoveTowardsThem", func(t *testing.T) {
		t.Parallel()
		rng := rand.New(rand.NewSource(20260921))
		for iter := range 2000 {
			n := 1 + rng.Intn(64)
			r := 1 + rng.Intn(20)
			ids := make([]string, r)
			for i := range ids {
				ids[i] = fmt.Sprintf("r%02d", rng.Intn(100))
			}
			held := make(map[string]int)
			left := n
			for _, id := range ids {
				h := rng.Intn(left + 1)
				held[id], left = h, left-h
			}
			fs, err := FairShares(n, ids, "", held)
			if err != nil {
				t.Fatal(err)
			}
			checkPartition(t, fs, n)
			// Move one relay's held count one step towards its share.
			k := rng.Intn(len(fs.Relays))
			id := fs.Relays[k]
			moved := maps.Clone(held)
			switch {
			case moved[id] > fs.Shares[k]:
				moved[id]--
			case moved[id] < fs.Shares[k]:
				moved[id]++
			default:
				continue
			}
			after, err := FairShares(n, ids, "", moved)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(after.Shares, fs.Shares) {
				t.Fatalf("iteration %d: n=%d held %v -> %v (%s moved) changed shares %v -> %v", iter, n, held, moved, id, fs.Shares, after.Shares)
			}
		}
	})

	t.Run("RelayOutsideTheFleet", func(t *testing.T) {
		t.Parallel()
		fs, err := FairShares(4, []string{"a", "b"}, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		if fs.Rank("x") != -1 || fs.Share("x") != 0 || fs.StandbyRank("x") != -1 {
			t.Fatalf("outsider: rank %d share %d standby %d", fs.Rank("x"), fs.Share("x"), fs.StandbyRank("x"))
		}
		if s, e := fs.Range("x"); s != e {
			t.Fatalf("outsider range [%d,%d)", s, e)
		}
	})

	t.Run("InvalidArguments", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			name      string
			n         int
			active    []string
			requester string
		}{
			{"zero buckets", 0, []string{"a"}, "a"},
			{"negative buckets", -1, []string{"a"}, "a"},
			{"no relay", 4, nil, ""},
			{"empty id", 4, []string{"a", ""}, "a"},
		} {
			if _, err := FairShares(c.n, c.active, c.requester, nil); !errors.Is(err, ErrMisconfigured) {
				t.Errorf("%s: err = %v, want ErrMisconfigured", c.name, err)
			}
		}
	})

	// CompareOrdinal_IsUTF16CodeUnitOrder checks the rank order against
	// .NET's StringComparer.Ordinal, modelled by comparing UTF-16 encodings.
	t.Run("CompareOrdinal_IsUTF16CodeUnitOrder", func(t *testing.T) {
		t.Parallel()
		utf16Cmp := func(a, b string) int {
			return slices.Compare(utf16.Encode([]rune(a)), utf16.Encode([]rune(b)))
		}
		words := []string{"", "a", "A", "ab", "b", "relay-10", "relay-9", "pod-a", "pod-q", "Z",
			"\u00e9", "\u4e2d", "\uff21", "\U0001F600", "\U00010000", "a\U0001F600", "a\uff21", "\ue000", "\ud7ff"}
		for _, a := range words {
			for _, b := range words {
				if got, want := sign(compareOrdinal(a, b)), sign(utf16Cmp(a, b)); got != want {
					t.Errorf("compareOrdinal(%q, %q) = %d, UTF-16 order says %d", a, b, got, want)
				}
				if isASCII(a) && isASCII(b) && sign(compareOrdinal(a, b)) != sign(strings.Compare(a, b)) {
					t.Errorf("ASCII %q vs %q differs from byte order", a, b)
				}
			}
		}
		// The case byte order gets wrong: a supplementary character (surrogate
		// pair, 0xD83D...) sorts before U+FF21 in UTF-16 but after it in UTF-8.
		if compareOrdinal("\U0001F600", "\uff21") >= 0 {
			t.Fatal("supplementary character must sort before U+FF21 as in .NET")
		}
		rng := rand.New(rand.NewSource(7))
		alphabet := []rune{'a', 'b', '-', '0', '\u00e9', '\uffee', '\U00010001', '\U0010fff0'}
		for range 5000 {
			a, b := randomWord(rng, alphabet), randomWord(rng, alphabet)
			if got, want := sign(compareOrdinal(a, b)), sign(utf16Cmp(a, b)); got != want {
				t.Fatalf("compareOrdinal(%q, %q) = %d, UTF-16 order says %d", a, b, got, want)
			}
		}
	})
}

// checkPartition asserts that the shares sum to n and the ranges, in rank
// order, tile [0, n).
func checkPartition(t *testing.T, fs FairShare, n int) {
	t.Helper()
	next := 0
	for k, id := range fs.Relays {
		s, e := fs.Range(id)
		if s != next || e-s != fs.Shares[k] || fs.Share(id) != fs.Shares[k] {
			t.Fatalf("rank %d (%s): range [%d,%d) share %d, expected to start at %d", k, id, s, e, fs.Shares[k], next)
		}
		next = e
	}
	if next != n {
		t.Fatalf("ranges cover [0,%d), want [0,%d)", next, n)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func randomWord(rng *rand.Rand, alphabet []rune) string {
	r := make([]rune, rng.Intn(5))
	for i := range r {
		r[i] = alphabet[rng.Intn(len(alphabet))]
	}
	return string(r)
}

func sign(x int) int {
	switch {
	case x < 0:
		return -1
	case x > 0:
		return 1
	}
	return 0
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
