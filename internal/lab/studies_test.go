package lab_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/spillway-dev/spillway/internal/lab"

	// The simulated studies register themselves: economy the bill studies
	// (cost, idle, economy), scale and steady their own.
	"github.com/spillway-dev/spillway/internal/economy"
	_ "github.com/spillway-dev/spillway/internal/scale"
	_ "github.com/spillway-dev/spillway/internal/steady"
)

var (
	update   = flag.Bool("update", false, "rewrite docs/lab/*.txt (and docs/economy.svg, docs/latency.svg) from this run")
	scenario = flag.String("scenario", "", "run only these simulated studies, comma-separated (default: every one)")
)

// TestStudies runs every simulated study in its own synctest bubble, at its
// default seed, and compares its tables with the ones docs/lab holds: the
// figures are exact, so any difference is a change of behaviour (or of the
// study) to explain, and -update records it.
func TestStudies(t *testing.T) {
	want := map[string]bool{}
	for _, n := range strings.Split(*scenario, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	studies := lab.Scenarios(true)
	if len(studies) == 0 {
		t.Fatal("no simulated study is registered")
	}
	for _, s := range studies {
		if len(want) > 0 && !want[s.Name] {
			continue
		}
		t.Run(s.Name, func(t *testing.T) {
			if testing.Short() {
				t.Skip("simulated studies are skipped in -short mode")
			}
			var rep lab.Report
			synctest.Test(t, func(t *testing.T) {
				var err error
				if rep, err = s.Run(t.Context(), lab.Config{Settle: synctest.Wait}); err != nil {
					t.Fatal(err)
				}
			})
			// A report is also its figures as JSON.
			if _, err := json.Marshal(rep); err != nil {
				t.Errorf("%T does not marshal to JSON: %v", rep, err)
			}
			var got bytes.Buffer
			for _, tb := range rep.Tables() {
				if err := tb.Write(&got); err != nil {
					t.Fatal(err)
				}
				got.WriteString("\n")
			}
			golden := filepath.Join("..", "..", "docs", "lab", s.Name+".txt")
			if *update {
				writeFile(t, golden, got.Bytes())
				if res, ok := rep.(economy.Result); ok {
					var svg bytes.Buffer
					if err := res.WritePlot(&svg); err != nil {
						t.Fatal(err)
					}
					writeFile(t, filepath.Join("..", "..", "docs", "economy.svg"), svg.Bytes())
					svg.Reset()
					if err := res.WriteCurvePlot(&svg); err != nil {
						t.Fatal(err)
					}
					writeFile(t, filepath.Join("..", "..", "docs", "latency.svg"), svg.Bytes())
				}
				return
			}
			old, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to record the study)", err)
			}
			if !bytes.Equal(old, got.Bytes()) {
				t.Errorf("%s differs from this run (a change to explain; -update records it):\n%s", golden, firstDifference(string(old), got.String()))
			}
		})
	}
}

// TestSimulatedStudiesRefuseToRunOutsideABubble: outside a bubble a study's
// clock would be the wall clock.
func TestSimulatedStudiesRefuseToRunOutsideABubble(t *testing.T) {
	for _, s := range lab.Scenarios(true) {
		if _, err := s.Run(t.Context(), lab.Config{}); err != lab.ErrNotInBubble {
			t.Errorf("%s outside a bubble: %v, want ErrNotInBubble", s.Name, err)
		}
	}
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// firstDifference shows the first line that differs, with its neighbours.
func firstDifference(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return fmt.Sprintf("line %d:\n  docs: %s\n  run:  %s", i+1, a, b)
		}
	}
	return "(no line differs)"
}
