package bench

import "testing"

func TestPickCases(t *testing.T) {
	t.Run("ByNameInTheOrderNamed", func(t *testing.T) {
		got, err := pickCases([]string{"r1-b8-v1024", "r1-b1-v16384"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0] != (ThroughputCase{Relays: 1, Buckets: 8, ValueSize: 1024}) || got[1] != (ThroughputCase{Relays: 1, Buckets: 1, ValueSize: 16384}) {
			t.Errorf("picked %+v", got)
		}
		if _, err := pickCases([]string{"r2-b8-v1024"}); err == nil {
			t.Error("a case the scenario does not have was picked")
		}
		if got, err := pickCases(nil); err != nil || got != nil {
			t.Errorf("no names: %+v, %v; want none, so the defaults run", got, err)
		}
	})
}
