package suggest

import "testing"

func TestNearest(t *testing.T) {
	names := []string{"status", "drain", "parked", "bucket-count", "bucketCount", "table"}
	t.Run("SuggestsWithinTheEditBudget", func(t *testing.T) {
		for _, c := range []struct {
			word, want string
			ok         bool
		}{
			{"stauts", "status", true},         // a swap: 2 edits
			{"drian", "drain", true},           // a swap
			{"tabel", "table", true},           // a swap
			{"bucketCnt", "bucketCount", true}, // 2 deletions
			{"BUCKETCOUNT", "bucketCount", true},
			{"bucket-cnt", "bucket-count", true},
			{"delete", "table", false}, // nothing near
			{"xyz", "table", false},
		} {
			got, ok := Nearest(c.word, names)
			if ok != c.ok || (ok && got != c.want) {
				t.Errorf("Nearest(%q) = %q, %v; want %q, %v", c.word, got, ok, c.want, c.ok)
			}
		}
	})
	t.Run("NoCandidatesSuggestNothing", func(t *testing.T) {
		if got, ok := Nearest("status", nil); ok || got != "" {
			t.Errorf("Nearest over no names = %q, %v", got, ok)
		}
	})
}
