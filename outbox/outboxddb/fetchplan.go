package outboxddb

import "slices"

// maxFetchReads bounds the reads a fetch adds to its query pages: gap
// probes and transaction snapshots together. A fetch that would need more
// returns the rows before the first it could not settle.
const maxFetchReads = 8

// fetchedRow is what the fetch's decision reads of a row it fetched.
type fetchedRow struct {
	seq int64
	// page numbers the query page that read the row, from 0.
	page int
	// res is the row's stamp (stampOf); stamped is false without one.
	res     reservation
	stamped bool
}

// seqRun is the run of sequence numbers first..last.
type seqRun struct{ first, last int64 }

// fetchView is what a fetch knows when it decides what to do next.
type fetchView struct {
	// rows are the rows fetched, ascending.
	rows []fetchedRow
	// complete: the fetch read to the end of the bucket, so a number above
	// the last row that no row holds is not one the fetch left unread.
	complete bool
	// probed are runs a probe found empty after rows were read.
	probed []seqRun
	// gone are numbers a snapshot found absent once their transaction had
	// completed: published and deleted, or parked, for good.
	gone []int64
	// committing is the first number of a reservation a snapshot found
	// still committing; 0 for none.
	committing int64
	// reads counts the probes and snapshots sent so far.
	reads int
}

// fetchStep is the fetch's next move: probe a run, read the missing
// numbers of a stamped reservation as one snapshot, or return
// rows[:accept].
type fetchStep struct {
	probe    seqRun
	snapshot []int64
	// of is the reservation snapshot belongs to.
	of     reservation
	accept int
}

// planFetch decides, from what the fetch has read, which prefix of the rows
// no earlier committed message of their keys can still be missing from, or
// which read would settle the next row. It is the rule of docs/protocol.md
// ("Fetching a bucket in order"), argued in docs/order.md; a pure function
// of v.
//
// A stamped row's block (its transaction's numbers in the bucket) goes
// whole, or as far as the fetch's limit let it read: a query that overlaps
// the commit can show some of the block's rows without the others (and a
// count can miss them too), so every number of the block must have been
// read or be gone. A block that starts the batch may have its missing
// numbers read as one snapshot (TransactGetItems, which DynamoDB refuses
// while a transaction writing one of them commits): that tells rows still
// committing from rows published and deleted, or parked, after their
// transaction completed. Numbers below a row outside its block need no
// probe when the page that read the row also scanned them: a strongly
// consistent page reflects every transaction completed before it, and a
// writer that serializes a key completes the earlier transaction before it
// reserves the later one. Runs that an earlier page scanned, and every run
// below a row without a stamp (its transaction's rows are unknown, and a
// writer of another language may reserve them apart), need a probe sent
// after the row was read.
func planFetch(v fetchView) fetchStep {
	present := make(map[int64]bool, len(v.rows))
	for _, r := range v.rows {
		present[r.seq] = true
	}
	type scanned struct {
		seqRun
		page int
	}
	var gaps []scanned
	prev := int64(0)
	for i, r := range v.rows {
		if prev+1 < r.seq {
			gaps = append(gaps, scanned{seqRun{prev + 1, r.seq - 1}, r.page})
		}
		prev = r.seq
		if first := i == 0 || v.rows[i-1].res != r.res || !v.rows[i-1].stamped; r.stamped && first {
			// The first row of its block in the batch (a block's rows are
			// consecutive): the block goes whole, or not yet. At the head
			// of the batch its missing numbers can be read as one
			// snapshot; further in, the batch ends before it.
			missing := v.missing(r.res, present)
			if r.res.first == v.committing || (missing != nil && (i > 0 || v.reads >= maxFetchReads)) {
				return fetchStep{accept: trimmed(v.rows, i)}
			}
			if missing != nil {
				return fetchStep{snapshot: missing, of: r.res}
			}
		}
		for _, g := range gaps {
			if (r.stamped && g.page == r.page) || settled(g.seqRun, v) {
				continue
			}
			if v.reads >= maxFetchReads {
				return fetchStep{accept: trimmed(v.rows, i)}
			}
			return fetchStep{probe: g.seqRun}
		}
	}
	return fetchStep{accept: trimmed(v.rows, len(v.rows))}
}

// missing returns the numbers of res that were neither read nor found
// gone, up to the last row read unless the fetch read to the end.
func (v fetchView) missing(res reservation, present map[int64]bool) []int64 {
	last := res.first + res.count - 1
	if !v.complete && len(v.rows) > 0 {
		last = min(last, v.rows[len(v.rows)-1].seq)
	}
	var out []int64
	for n := res.first; n <= last; n++ {
		if !present[n] && !slices.Contains(v.gone, n) {
			out = append(out, n)
		}
	}
	return out
}

// settled reports whether a probe found s empty, or every number of s is
// gone.
func settled(s seqRun, v fetchView) bool {
	for _, p := range v.probed {
		if p.first <= s.first && s.last <= p.last {
			return true
		}
	}
	gone := int64(0)
	for _, n := range v.gone {
		if s.first <= n && n <= s.last {
			gone++
		}
	}
	return gone == s.last-s.first+1
}

// trimmed is n, or less so that rows[:n] does not end inside a block that
// goes on past it (a cut, or the fetch's limit): the rest of that
// transaction goes with it, next time, rather than be left behind as a head
// that needs a snapshot. A block that starts the batch is not trimmed: its
// rows read so far go, and the rest follows.
func trimmed(rows []fetchedRow, n int) int {
	if n == 0 {
		return 0
	}
	last := rows[n-1]
	if !last.stamped || last.res.first+last.res.count-1 <= last.seq {
		return n
	}
	for i := range n {
		if rows[i].seq >= last.res.first {
			if i == 0 {
				return n
			}
			return i
		}
	}
	return n
}
