package outboxddb

import (
	"reflect"
	"testing"
)

func TestFetchPlan(t *testing.T) {
	t.Parallel()
	// row is a row of page 0 stamped with first..first+count-1; plain is
	// one without a stamp; paged moves a row to another page.
	row := func(seq, first, count int64) fetchedRow {
		return fetchedRow{seq: seq, res: reservation{first, count}, stamped: true}
	}
	plain := func(seq int64) fetchedRow { return fetchedRow{seq: seq} }
	paged := func(r fetchedRow, page int) fetchedRow { r.page = page; return r }
	odd := func(last int64, stamp bool) []fetchedRow {
		var rows []fetchedRow
		for seq := int64(1); seq <= last; seq += 2 {
			if stamp {
				rows = append(rows, row(seq, seq, 1))
			} else {
				rows = append(rows, plain(seq))
			}
		}
		return rows
	}
	for name, c := range map[string]struct {
		v    fetchView
		want fetchStep
	}{
		"StampedRowsOfOnePage_GoAcrossEveryGap_WithoutAProbe": {
			v:    fetchView{rows: []fetchedRow{row(4, 4, 1), row(7, 7, 2), row(8, 7, 2), row(30, 30, 1)}},
			want: fetchStep{accept: 4},
		},
		"AStampedRowWhoseReservationIsNotReadWhole_EndsTheBatch": {
			// 19 and 20 are one transaction; the query showed 20 alone.
			v:    fetchView{rows: append(odd(17, true), row(20, 19, 2))},
			want: fetchStep{accept: 9},
		},
		"AtTheHead_TheMissingNumbersAreReadAsOneSnapshot": {
			v:    fetchView{rows: []fetchedRow{row(2, 1, 3), row(3, 1, 3), row(9, 9, 1)}},
			want: fetchStep{snapshot: []int64{1}, of: reservation{1, 3}},
		},
		"TheSnapshotCoversTheReservationsRowsFurtherIn": {
			v:    fetchView{rows: []fetchedRow{row(5, 5, 6), row(7, 5, 6), row(10, 5, 6)}},
			want: fetchStep{snapshot: []int64{6, 8, 9}, of: reservation{5, 6}},
		},
		"NumbersASnapshotFoundGone_AreSettled": {
			v:    fetchView{rows: []fetchedRow{row(5, 5, 6), row(7, 5, 6), row(10, 5, 6)}, gone: []int64{6, 8, 9}, reads: 1},
			want: fetchStep{accept: 3},
		},
		"AReservationFoundCommitting_ReturnsNothingOfIt": {
			v:    fetchView{rows: []fetchedRow{row(2, 1, 2), row(9, 9, 1)}, committing: 1, reads: 1},
			want: fetchStep{accept: 0},
		},
		"AfterTheProbeBudget_NoSnapshot": {
			v:    fetchView{rows: []fetchedRow{row(2, 1, 2)}, reads: maxFetchReads},
			want: fetchStep{accept: 0},
		},
		"AnUnstampedHead_ProbesEverythingBelowIt": {
			v:    fetchView{rows: []fetchedRow{plain(6), plain(7)}},
			want: fetchStep{probe: seqRun{1, 5}},
		},
		"UnstampedRows_ProbeEachGapInOrder": {
			v:    fetchView{rows: []fetchedRow{plain(1), plain(3), plain(6)}, probed: []seqRun{{2, 2}}, reads: 1},
			want: fetchStep{probe: seqRun{4, 5}},
		},
		"UnstampedRows_AreCutAtTheFirstGapPastTheBudget": {
			// Eight gaps probed empty; the ninth cannot be: 20 does not go.
			v: fetchView{rows: append(odd(17, false), plain(20)), reads: maxFetchReads,
				probed: []seqRun{{2, 2}, {4, 4}, {6, 6}, {8, 8}, {10, 10}, {12, 12}, {14, 14}, {16, 16}}},
			want: fetchStep{accept: 9},
		},
		"AStampedRowOfALaterPage_ProbesWhatEarlierPagesScanned": {
			v:    fetchView{rows: []fetchedRow{row(3, 3, 1), row(5, 5, 1), paged(row(9, 9, 1), 1)}},
			want: fetchStep{probe: seqRun{1, 2}},
		},
		"AStampedRowOfALaterPage_GoesOnceThoseRunsAreProbed": {
			v:    fetchView{rows: []fetchedRow{row(3, 3, 1), row(5, 5, 1), paged(row(9, 9, 1), 1)}, probed: []seqRun{{1, 2}, {4, 4}}, reads: 2},
			want: fetchStep{accept: 3},
		},
		"ABatchTheLimitEndsInsideABlock_EndsBeforeTheBlock": {
			v:    fetchView{rows: []fetchedRow{row(1, 1, 1), row(2, 2, 3), row(3, 2, 3)}},
			want: fetchStep{accept: 1},
		},
		"ABlockStartingTheBatch_GoesAsFarAsTheLimitLetItBeRead": {
			v:    fetchView{rows: []fetchedRow{row(2, 2, 3), row(3, 2, 3)}},
			want: fetchStep{accept: 2},
		},
		"AtTheEndOfTheBucket_ABlocksMissingLaterRowsAreReadToo": {
			// 6 and 7 are neither read nor beyond the fetch's limit: still
			// committing, or gone.
			v:    fetchView{rows: []fetchedRow{row(5, 5, 3)}, complete: true},
			want: fetchStep{snapshot: []int64{6, 7}, of: reservation{5, 3}},
		},
		"AtTheEndOfTheBucket_ABlockFurtherInWaits": {
			v:    fetchView{rows: []fetchedRow{row(1, 1, 1), row(5, 5, 3)}, complete: true},
			want: fetchStep{accept: 1},
		},
		"ABlockWhoseLaterRowsAreGone_Goes": {
			v:    fetchView{rows: []fetchedRow{row(5, 5, 3), row(6, 5, 3)}, complete: true, gone: []int64{7}, reads: 1},
			want: fetchStep{accept: 2},
		},
		"NoRows": {
			want: fetchStep{accept: 0},
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := planFetch(c.v); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("planFetch = %+v, want %+v", got, c.want)
			}
		})
	}
}
