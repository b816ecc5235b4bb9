package lab

import (
	"strings"
	"testing"
)

func TestTable(t *testing.T) {
	t.Run("AlignsFiguresRight", func(t *testing.T) {
		var b strings.Builder
		err := Table{
			Title:  "T",
			Header: []string{"name", "n", "cost"},
			Rows:   [][]string{{"a", "1", "$0.5"}, {"long name", "1000", "-"}},
			Notes:  []string{"note"},
		}.Write(&b)
		if err != nil {
			t.Fatal(err)
		}
		want := "T\n" +
			"name          n  cost\n" +
			"---------  ----  ----\n" +
			"a             1  $0.5\n" +
			"long name  1000     -\n" +
			"  note\n"
		if b.String() != want {
			t.Errorf("got\n%s\nwant\n%s", b.String(), want)
		}
	})
}
