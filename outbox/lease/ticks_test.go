package lease

import (
	"testing"
	"time"
)

func TestTicks(t *testing.T) {
	t.Parallel()
	t.Run("Vectors", func(t *testing.T) {
		t.Parallel()
		for _, c := range []struct {
			name string
			t    time.Time
			want int64
		}{
			{"facts example", time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC), 639238464000000000},
			{"unix epoch", time.Unix(0, 0), 621355968000000000},
			{"tick epoch is Go's zero time", time.Time{}, 0},
			{"one tick", time.Date(1, 1, 1, 0, 0, 0, 100, time.UTC), 1},
			{"zone is irrelevant", time.Date(2026, 9, 1, 10, 0, 0, 0, time.FixedZone("CEST", 2*3600)), 639238464000000000},
			{".NET DateTime.MaxValue", time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC), 3155378975999999999},
			{"before 1970", time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC), 621355968000000000 - 10_000_000},
		} {
			if got := Ticks(c.t); got != c.want {
				t.Errorf("%s: Ticks(%v) = %d, want %d", c.name, c.t, got, c.want)
			}
		}
	})

	t.Run("TruncatesBelow100ns", func(t *testing.T) {
		t.Parallel()
		base := time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC)
		for ns := range 100 {
			if got := Ticks(base.Add(time.Duration(ns))); got != 639238464000000000 {
				t.Fatalf("Ticks(+%dns) = %d, want the tick of the whole 100 ns", ns, got)
			}
		}
		if got := Ticks(base.Add(100)); got != 639238464000000001 {
			t.Fatalf("Ticks(+100ns) = %d", got)
		}
		// Before 1970 the truncation is still towards the past, as .NET's.
		pre := time.Unix(0, -50)
		if got, want := Ticks(pre), int64(621355968000000000-1); got != want {
			t.Fatalf("Ticks(1970 - 50ns) = %d, want %d", got, want)
		}
	})

	t.Run("TimeFromTicks_InvertsTicks", func(t *testing.T) {
		t.Parallel()
		if got := TimeFromTicks(639238464000000000); !got.Equal(time.Date(2026, 9, 1, 8, 0, 0, 0, time.UTC)) || got.Location() != time.UTC {
			t.Fatalf("TimeFromTicks(facts example) = %v", got)
		}
		if got := TimeFromTicks(0); !got.IsZero() {
			t.Fatalf("TimeFromTicks(0) = %v, want the zero time", got)
		}
		for _, tm := range []time.Time{
			time.Date(2026, 9, 1, 8, 0, 0, 123456700, time.UTC),
			time.Date(1969, 7, 20, 20, 17, 40, 100, time.UTC),
			time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
			time.Date(9999, 12, 31, 23, 59, 59, 999999900, time.UTC),
			time.Date(1600, 2, 29, 12, 0, 0, 500, time.UTC),
		} {
			if got := TimeFromTicks(Ticks(tm)); !got.Equal(tm) {
				t.Errorf("TimeFromTicks(Ticks(%v)) = %v", tm, got)
			}
		}
		for _, ticks := range []int64{1, 621355967999999999, 621355968000000001, 639238464000000000, 3155378975999999999} {
			if got := Ticks(TimeFromTicks(ticks)); got != ticks {
				t.Errorf("Ticks(TimeFromTicks(%d)) = %d", ticks, got)
			}
		}
		// Sub-tick time is lost in the round trip, by design.
		tm := time.Date(2026, 9, 1, 8, 0, 0, 199, time.UTC)
		if got := TimeFromTicks(Ticks(tm)); !got.Equal(tm.Add(-99)) {
			t.Errorf("round trip of %v = %v, want it truncated to 100 ns", tm, got)
		}
	})
}
