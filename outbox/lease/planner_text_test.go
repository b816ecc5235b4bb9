package lease

import (
	"bytes"
	"cmp"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/planner.txt from the planner's decisions")

// plannerText is the rendered form of the shared planner vectors.
var plannerText = filepath.Join("testdata", "planner.txt")

const plannerTextHeader = `# The acquisition planner (PlanLeases) on every case of
# testdata/planner-vectors.json, rendered by TestPlanLeasesText/TextVectors.
# Regenerate after a deliberate change of the planner with
#   go test ./outbox/lease -run TestPlanLeasesText/TextVectors -update
# and read the diff: it is the planner's change of behaviour.
#
# Input: the bucket count, the requester, the active relays as listed, and
# each bucket's lease as the requester read it at now, eight buckets a
# line: "x" a lease of x live at now, "x*" a lease of x expired at or
# before now, "-" no owner. Output: the buckets the requester keeps,
# releases and claims, its standby rank (-1: it has a share or a lease),
# and every relay's share, grouped by share.
`

func TestPlanLeasesText(t *testing.T) {
	t.Parallel()
	// TextVectors checks testdata/planner.txt byte for byte
	// against the planner's decisions on the shared vectors, so that a change
	// of the planner shows as a readable diff of that file. With -update it
	// rewrites the file instead.
	t.Run("TextVectors", func(t *testing.T) {
		t.Parallel()
		var got bytes.Buffer
		got.WriteString(plannerTextHeader)
		for i, v := range loadPlannerVectors(t) {
			p, err := PlanLeases(v.n, v.active, v.requester, v.leases)
			if err != nil {
				t.Fatalf("vector %d: %v", i+1, err)
			}
			renderVector(&got, i+1, v, p)
		}
		if *update {
			if err := os.MkdirAll(filepath.Dir(plannerText), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(plannerText, got.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		want, err := os.ReadFile(plannerText)
		if err != nil {
			t.Fatalf("%v (create it with -update)", err)
		}
		if bytes.Equal(got.Bytes(), want) {
			return
		}
		gotBlocks, wantBlocks := splitBlocks(got.String()), splitBlocks(string(want))
		shown := 0
		for i := range max(len(gotBlocks), len(wantBlocks)) {
			g, w := blockAt(gotBlocks, i), blockAt(wantBlocks, i)
			if g == w || shown == 3 {
				continue
			}
			shown++
			t.Errorf("block %d differs\n--- %s says:\n%s--- the planner decides:\n%s", i, plannerText, w, g)
		}
		t.Errorf("%s differs from the planner's decisions (first %d blocks shown); if the change is meant, rerun with -update", plannerText, shown)
	})
}

// plannerVector is one case of testdata/planner-vectors.json: what a
// requester read in an acquisition round, and what it must decide.
type plannerVector struct {
	n         int
	active    []string
	requester string
	leases    []BucketLease
	want      Plan
}

// loadPlannerVectors reads the shared planner vectors.
func loadPlannerVectors(t *testing.T) []plannerVector {
	t.Helper()
	var cases []struct {
		BucketCount int      `json:"bucketCount"`
		Active      []string `json:"active"`
		Requester   string   `json:"requester"`
		Leases      []struct {
			Owner   *string `json:"owner"`
			Expired bool    `json:"expired"`
		} `json:"leases"`
		Expect struct {
			Keep        []int          `json:"keep"`
			Release     []int          `json:"release"`
			Claim       []int          `json:"claim"`
			StandbyRank int            `json:"standbyRank"`
			Shares      map[string]int `json:"shares"`
		} `json:"expect"`
	}
	loadJSON(t, "planner-vectors.json", &cases)
	if len(cases) != 600 {
		t.Fatalf("planner-vectors.json has %d cases, want 600", len(cases))
	}
	vs := make([]plannerVector, len(cases))
	for i, c := range cases {
		leases := make([]BucketLease, len(c.Leases))
		for b, l := range c.Leases {
			if l.Owner != nil {
				leases[b] = BucketLease{Owner: *l.Owner, Expired: l.Expired}
			}
		}
		e := c.Expect
		vs[i] = plannerVector{c.BucketCount, c.Active, c.Requester, leases,
			Plan{Keep: e.Keep, Release: e.Release, Claim: e.Claim, StandbyRank: e.StandbyRank, Shares: e.Shares}}
	}
	return vs
}

// renderVector writes one block: the vector's input, then the plan.
func renderVector(w *bytes.Buffer, i int, v plannerVector, p Plan) {
	fmt.Fprintf(w, "\nvector %d\n", i)
	fmt.Fprintf(w, "  buckets    %d\n", v.n)
	fmt.Fprintf(w, "  requester  %s\n", v.requester)
	fmt.Fprintf(w, "  active     %s\n", strings.Join(v.active, " "))
	w.WriteString("  leases at now\n")
	for from := 0; from < len(v.leases); from += 8 {
		to := min(from+8, len(v.leases))
		words := make([]string, 0, to-from)
		for _, l := range v.leases[from:to] {
			switch {
			case l.Owner == "":
				words = append(words, "-")
			case l.Expired:
				words = append(words, l.Owner+"*")
			default:
				words = append(words, l.Owner)
			}
		}
		fmt.Fprintf(w, "    %-8s %s\n", fmt.Sprintf("%d-%d", from, to-1), strings.Join(words, " "))
	}
	w.WriteString("  plan\n")
	fmt.Fprintf(w, "    keep     %s\n", buckets(p.Keep))
	fmt.Fprintf(w, "    release  %s\n", buckets(p.Release))
	fmt.Fprintf(w, "    claim    %s\n", buckets(p.Claim))
	fmt.Fprintf(w, "    standby  %d\n", p.StandbyRank)
	fmt.Fprintf(w, "    shares   %s\n", shares(p.Shares))
}

// buckets renders a bucket list, "-" when empty.
func buckets(bs []int) string {
	if len(bs) == 0 {
		return "-"
	}
	words := make([]string, len(bs))
	for i, b := range bs {
		words[i] = fmt.Sprint(b)
	}
	return strings.Join(words, " ")
}

// shares renders the share map grouped by share, largest first, relays
// ascending within a group: "2: a b | 1: c".
func shares(m map[string]int) string {
	ids := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b))
	})
	var groups []string
	for i := 0; i < len(ids); {
		j := i
		for j < len(ids) && m[ids[j]] == m[ids[i]] {
			j++
		}
		groups = append(groups, fmt.Sprintf("%d: %s", m[ids[i]], strings.Join(ids[i:j], " ")))
		i = j
	}
	return strings.Join(groups, " | ")
}

// splitBlocks parses a rendered file into its blocks, in order: the
// header, then one per vector, each with its lines.
func splitBlocks(text string) []string {
	blocks := []string{""}
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "vector ") {
			blocks = append(blocks, "")
		}
		blocks[len(blocks)-1] += line
	}
	return blocks
}

// blockAt returns block i, or "(none)" past the end.
func blockAt(blocks []string, i int) string {
	if i < len(blocks) {
		return blocks[i]
	}
	return "(none)\n"
}
