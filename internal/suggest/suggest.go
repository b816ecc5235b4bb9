// Package suggest finds the name a mistyped one was meant to be: the CLI's
// "did you mean" for commands and flags and the CDK stack's for context
// keys say it the same way.
package suggest

import "strings"

// Nearest returns the candidate closest to word in edit distance, ignoring
// case, and whether it is close enough to suggest: at most 2 edits, or a
// third of word's length for longer words. Ties go to the earlier
// candidate.
func Nearest(word string, candidates []string) (string, bool) {
	nearest, best := "", -1
	for _, c := range candidates {
		if d := distance(strings.ToLower(word), strings.ToLower(c)); best < 0 || d < best {
			nearest, best = c, d
		}
	}
	return nearest, best >= 0 && best <= max(2, len(word)/3)
}

// distance is the Levenshtein distance between a and b, in bytes.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
