package repocheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// economyRow matches a row of docs/lab/economy.txt's first table: the rate,
// the deployment and, second to last, the total per month.
var economyRow = regexp.MustCompile(`(?m)^(\d+(?:\.\d+)?)\s+(spillway|fargate|streams)\b.*\s(\$[\d.]+)\s+\S+$`)

func TestReadmeFigures(t *testing.T) {
	// The README's cost table shows every rate of the lab's economy study with
	// its totals exactly as docs/lab/economy.txt prints them (the unflattering
	// 0.1 msg/s row included), and calls them simulated, which they are.
	t.Run("CostTableIsTheLabs", func(t *testing.T) {
		economy := readRepoFile(t, "docs/lab/economy.txt")
		lab := map[string]map[string]string{} // rate -> deployment -> total
		var rates []string
		for _, m := range economyRow.FindAllStringSubmatch(economy, -1) {
			if lab[m[1]] == nil {
				lab[m[1]] = map[string]string{}
				rates = append(rates, m[1])
			}
			lab[m[1]][m[2]] = m[3]
		}
		if len(rates) < 4 {
			t.Fatalf("economy.txt rows not found: %v", rates)
		}
		readme := readRepoFile(t, "README.md")
		head := "| msg/s | Spillway | always-on relay on Fargate | Streams → Lambda (model) |"
		i := strings.Index(readme, head)
		if i < 0 {
			t.Fatalf("README has no cost table headed %q", head)
		}
		before := strings.TrimRight(readme[:i], "\n")
		intro := before[strings.LastIndex(before, "\n\n")+2:]
		if !strings.HasPrefix(intro, "Simulated") || !strings.Contains(intro, "list prices") || strings.Contains(intro, "Measured") {
			t.Errorf("the cost table's introduction must say the figures are simulated at list prices:\n%s", intro)
		}
		rows := map[string][]string{}
		for _, line := range strings.Split(readme[i:], "\n")[2:] {
			if !strings.HasPrefix(line, "|") {
				break
			}
			var cells []string
			for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
				cells = append(cells, strings.ReplaceAll(strings.TrimSpace(c), ",", ""))
			}
			rows[cells[0]] = cells[1:]
		}
		for _, rate := range rates {
			got, ok := rows[rate]
			if !ok {
				t.Errorf("README's cost table has no %s msg/s row", rate)
				continue
			}
			want := []string{lab[rate]["spillway"], lab[rate]["fargate"], lab[rate]["streams"]}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("README at %s msg/s: %v, economy.txt: %v", rate, got, want)
			}
		}
		if len(rows) != len(rates) {
			t.Errorf("README's cost table has %d rows, economy.txt %d rates", len(rows), len(rates))
		}
	})

	// docs/benchmarks.md's whole-bill table shows, for every rate and
	// deployment of the lab's economy study, the total per month exactly as
	// docs/lab/economy.txt prints it, so a study that moves cannot leave the
	// page behind.
	t.Run("BenchmarksBillTableIsTheLabs", func(t *testing.T) {
		lab := map[string]string{} // "rate deployment" -> total
		for _, m := range economyRow.FindAllStringSubmatch(readRepoFile(t, "docs/lab/economy.txt"), -1) {
			lab[m[1]+" "+m[2]] = m[3]
		}
		page := readRepoFile(t, "docs/benchmarks.md")
		head := "| msg/s | deployment | WRU/msg | RRU/msg |"
		i := strings.Index(page, head)
		if i < 0 || len(lab) < 8 {
			t.Fatalf("bill table (%d) or economy rows (%d) not found", i, len(lab))
		}
		seen := 0
		for _, line := range strings.Split(page[i:], "\n")[2:] {
			if !strings.HasPrefix(line, "|") {
				break
			}
			var cells []string
			for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
				cells = append(cells, strings.NewReplacer(",", "", "*", "").Replace(strings.TrimSpace(c)))
			}
			deployment, _, _ := strings.Cut(cells[1], " ")
			key := cells[0] + " " + deployment
			if want, ok := lab[key]; !ok || cells[10] != want {
				t.Errorf("docs/benchmarks.md %s: total %s, economy.txt %q", key, cells[10], want)
			}
			seen++
		}
		if seen != len(lab) {
			t.Errorf("docs/benchmarks.md's bill table has %d rows, economy.txt %d", seen, len(lab))
		}
	})

	// docs/benchmarks.md's two cost tables (1 KB and 16 KB values) are
	// docs/lab/cost.txt's rows cell for cell, in order.
	t.Run("BenchmarksCostTablesAreTheLabs", func(t *testing.T) {
		var lab []string
		for _, m := range costRow.FindAllStringSubmatch(readRepoFile(t, "docs/lab/cost.txt"), -1) {
			lab = append(lab, "| "+strings.Join(m[1:], " | ")+" |")
		}
		var page []string
		for _, line := range strings.Split(readRepoFile(t, "docs/benchmarks.md"), "\n") {
			if costRow.MatchString(strings.NewReplacer(" | ", "   ", "| ", "", " |", "").Replace(line)) && strings.Count(line, "|") == 9 {
				page = append(page, line)
			}
		}
		if len(lab) != 16 {
			t.Fatalf("cost.txt: %d rows, want the 8 paths for 1 KB and 16 KB values", len(lab))
		}
		if strings.Join(page, "\n") != strings.Join(lab, "\n") {
			t.Errorf("docs/benchmarks.md's cost tables differ from docs/lab/cost.txt:\n%s\nwant:\n%s", strings.Join(page, "\n"), strings.Join(lab, "\n"))
		}
	})

	// The README's latency claim is the steady study's median and slowest
	// commit → publish, and says it was simulated.
	t.Run("LatencyIsTheSteadyStudys", func(t *testing.T) {
		steady := readRepoFile(t, "docs/lab/steady.txt")
		p50 := regexp.MustCompile(`commit → publish p50 / p90 / p99\s+([\d.]+m?s)`).FindStringSubmatch(steady)
		slowest := regexp.MustCompile(`slowest commit → publish\s+([\d.]+m?s)`).FindStringSubmatch(steady)
		if p50 == nil || slowest == nil {
			t.Fatal("steady.txt has no commit → publish figures")
		}
		readme := readRepoFile(t, "README.md")
		i := strings.Index(readme, "- **Latency.**")
		if i < 0 {
			t.Fatal("README has no latency claim")
		}
		line := readme[i : i+strings.Index(readme[i:], "\n")]
		// The README rounds the median to whole milliseconds.
		median, err := time.ParseDuration(p50[1])
		if err != nil {
			t.Fatal(err)
		}
		// The slowest as the table prints it: seconds as "1.015 s", below a
		// second as "992 ms".
		slow := strings.TrimSuffix(slowest[1], "s") + " s"
		if strings.HasSuffix(slowest[1], "ms") {
			slow = strings.TrimSuffix(slowest[1], "ms") + " ms"
		}
		for _, want := range []string{"Simulated", fmt.Sprintf("%d ms", median.Round(time.Millisecond).Milliseconds()), slow} {
			if !strings.Contains(line, want) {
				t.Errorf("README's latency claim lacks %q (from docs/lab/steady.txt):\n%s", want, line)
			}
		}
	})
}

// costRow matches a row of docs/lab/cost.txt's tables: the path, then its
// per, requests, WRU, RRU, model, formula and price columns.
var costRow = regexp.MustCompile(`(?m)^((?:Enqueue|caller|relay)[^\n]*?)\s{2,}(message|run|sample)\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s{2,}(.*?)\s{2,}(\$\S+)\s*$`)
