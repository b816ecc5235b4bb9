package repocheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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

// labTotals reads docs/lab/economy.txt's first table: rate -> deployment ->
// total per month as printed ("$129.27"), and the rates in order.
func labTotals(t *testing.T) (map[string]map[string]string, []string) {
	t.Helper()
	lab := map[string]map[string]string{}
	var rates []string
	for _, m := range economyRow.FindAllStringSubmatch(readRepoFile(t, "docs/lab/economy.txt"), -1) {
		if lab[m[1]] == nil {
			lab[m[1]] = map[string]string{}
			rates = append(rates, m[1])
		}
		lab[m[1]][m[2]] = m[3]
	}
	if len(rates) < 4 {
		t.Fatalf("economy.txt rows not found: %v", rates)
	}
	return lab, rates
}

// dollars parses a total as printed ("$1,168.37").
func dollars(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(strings.NewReplacer("$", "", ",", "").Replace(s), 64)
	if err != nil {
		t.Fatalf("%q is not a dollar figure: %v", s, err)
	}
	return v
}

// ratioHead heads the README's cost table.
const ratioHead = "| msg/s | Spillway ÷ always-on relay on Fargate | Spillway ÷ Streams → Lambda (model) |"

// readmeProse is the README without its code blocks, where figures are
// claims.
func readmeProse(t *testing.T) string {
	return regexp.MustCompile("(?s)```.*?```").ReplaceAllString(readRepoFile(t, "README.md"), "")
}

func TestReadmeFigures(t *testing.T) {
	// The README's cost table gives, for every rate of the lab's economy
	// study with traffic, Spillway's whole bill as a multiple of the
	// always-on relay's (from the totals, two decimals) and of the Streams
	// pattern's (as economy.txt prints that ratio), and calls the figures
	// simulated at list prices, which they are.
	t.Run("CostRatiosAreTheLabs", func(t *testing.T) {
		lab, rates := labTotals(t)
		streams := map[string]string{}
		for _, m := range regexp.MustCompile(`(\d+(?:\.\d+)?) msg/s ([\d.]+)x`).FindAllStringSubmatch(
			regexp.MustCompile(`Spillway / Streams pattern.*`).FindString(readRepoFile(t, "docs/lab/economy.txt")), -1) {
			streams[m[1]] = m[2] + "×"
		}
		readme := readRepoFile(t, "README.md")
		i := strings.Index(readme, ratioHead)
		if i < 0 {
			t.Fatalf("README has no cost table headed %q", ratioHead)
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
				cells = append(cells, strings.TrimSpace(c))
			}
			rows[cells[0]] = cells[1:]
		}
		want := 0
		for _, rate := range rates {
			if dollars(t, lab[rate]["streams"]) == 0 {
				continue // idle: no ratio to the Streams pattern's $0
			}
			want++
			got, ok := rows[rate]
			if !ok {
				t.Errorf("README's cost table has no %s msg/s row", rate)
				continue
			}
			fargate := fmt.Sprintf("%.2f×", dollars(t, lab[rate]["spillway"])/dollars(t, lab[rate]["fargate"]))
			if streams[rate] == "" || strings.Join(got, " ") != fargate+" "+streams[rate] {
				t.Errorf("README at %s msg/s: %v, economy.txt: [%s %s]", rate, got, fargate, streams[rate])
			}
		}
		if len(rows) != want {
			t.Errorf("README's cost table has %d rows, economy.txt %d rates with traffic", len(rows), want)
		}
	})

	// Every figure the README's prose claims is the lab's: a dollar figure
	// is a total of economy.txt (and the idle one Spillway's at 0 msg/s), a
	// duration in milliseconds or a percentage is printed in docs/lab, and
	// a multiple stands only in the cost table. A figure from anywhere else
	// (a bench run, a guess) fails here.
	t.Run("EveryFigureIsTheLabs", func(t *testing.T) {
		lab, _ := labTotals(t)
		totals := map[string]bool{}
		for _, byDeployment := range lab {
			for _, total := range byDeployment {
				totals[total] = true
			}
		}
		var labText strings.Builder
		for _, f := range []string{"cost.txt", "economy.txt", "idle.txt", "scale.txt", "steady.txt"} {
			labText.WriteString(strings.ReplaceAll(readRepoFile(t, "docs/lab/"+f), " %", "%"))
		}
		prose := readmeProse(t)
		for _, d := range regexp.MustCompile(`\$[\d,]+(?:\.\d+)?`).FindAllString(prose, -1) {
			if !totals[strings.ReplaceAll(d, ",", "")] {
				t.Errorf("README's %s is no total of docs/lab/economy.txt", d)
			}
		}
		if idle := regexp.MustCompile(`Idle it costs (\$[\d.]+) a month`).FindStringSubmatch(prose); idle == nil || idle[1] != lab["0"]["spillway"] {
			t.Errorf("README's idle cost %v, economy.txt's Spillway at 0 msg/s %s", idle, lab["0"]["spillway"])
		}
		for _, m := range regexp.MustCompile(`(\d+(?:\.\d+)?) (ms|%)`).FindAllStringSubmatch(prose, -1) {
			if !strings.Contains(labText.String(), m[1]+m[2]) {
				t.Errorf("README's %s %s is printed nowhere in docs/lab", m[1], m[2])
			}
		}
		table := readRepoFile(t, "README.md")
		table = table[strings.Index(table, ratioHead):]
		table = table[:strings.Index(table, "\n\n")]
		if got, inTable := strings.Count(prose, "×"), strings.Count(table, "×"); got != inTable {
			t.Errorf("README has %d multiples outside its cost table", got-inTable)
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
