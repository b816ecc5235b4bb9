package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// singleDash matches a flag written -flag; shortBeside a one-letter
// spelling listed beside its flag (-v, --verbose), or in a synopsis ([-v]);
// oneLetterLong a one-letter flag written --v.
var (
	singleDash    = regexp.MustCompile(`(^|[\s\[])-[a-z]`)
	shortBeside   = regexp.MustCompile(`(^|\s)-[a-z], --[a-z]|\[-[a-z]\]`)
	oneLetterLong = regexp.MustCompile(`--[a-z]\b`)
)

var update = flag.Bool("update", false, "rewrite the golden help files in testdata/help")

// helpTopics lists every command and verb `spillway help` explains.
func helpTopics() [][]string {
	var topics [][]string
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n := range docs {
			if !yield(n) {
				return
			}
		}
	}) {
		topics = append(topics, strings.Fields(name))
	}
	return topics
}

func TestHelp(t *testing.T) {
	// MatchesTheGoldenFiles checks `spillway help <command>` and
	// `spillway <command> -h` for every command and verb: the same text, on
	// stdout, exit 0, as recorded in testdata/help (go test -run Golden -update
	// rewrites them).
	t.Run("MatchesTheGoldenFiles", func(t *testing.T) {
		// Defaults shown in the help come from the environment.
		for _, env := range []string{outboxconf.EnvBucketCount, outboxconf.EnvDynamoDBEndpoint, outboxconf.EnvKafkaBrokers} {
			t.Setenv(env, "")
		}
		t.Setenv("TMPDIR", "/tmp")
		topics := append(helpTopics(), nil) // nil: the command list
		for _, topic := range topics {
			name := strings.Join(topic, "-")
			if name == "" {
				name = "commands"
			}
			code, out, errs := cli(t, append([]string{"help"}, topic...)...)
			if code != 0 || errs != "" {
				t.Errorf("help %v: exit %d, stderr %q", topic, code, errs)
			}
			if len(topic) > 0 && topic[0] != "help" {
				if c2, out2, _ := cli(t, append(slices.Clone(topic), "-h")...); c2 != 0 || out2 != out {
					t.Errorf("%v -h: exit %d, and its text differs from help's:\n%s", topic, c2, out2)
				}
			}
			path := filepath.Join("testdata", "help", name+".golden")
			if *update {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test -run Golden -update writes it)", err)
			}
			if out != string(want) {
				t.Errorf("help %v differs from %s:\n%s", topic, path, out)
			}
		}
	})

	// ListsOnlyACommandsOwnFlags: --brokers only where Kafka is used,
	// the bucket count only where buckets matter, --count never listed, every
	// flag written --flag (a one-letter flag -v, beside its long name), a
	// one-line description and an example everywhere.
	t.Run("ListsOnlyACommandsOwnFlags", func(t *testing.T) {
		for _, topic := range helpTopics() {
			_, out, _ := cli(t, append([]string{"help"}, topic...)...)
			name := strings.Join(topic, " ")
			wantBrokers := name == "drain" || name == "bench" || name == "inbox" || name == "inbox redrive"
			if got := strings.Contains(out, "--brokers"); got != wantBrokers {
				t.Errorf("help %s mentions --brokers: %v, want %v", name, got, wantBrokers)
			}
			if strings.Contains(out, " --count") || singleDash.MatchString(shortBeside.ReplaceAllString(out, "")) || oneLetterLong.MatchString(out) {
				t.Errorf("help %s lists --count, a -flag or a --v:\n%s", name, out)
			}
			if strings.Contains(out, "--verbose") != strings.Contains(out, "[-v]") {
				t.Errorf("help %s: a verbose flag and a usage line that disagree:\n%s", name, out)
			}
			if name == "create-table" && !strings.Contains(out, "--bucket-count") {
				t.Errorf("create-table does not list --bucket-count, which its layout record states")
			}
			if d := docs[name]; d.summary == "" || strings.Contains(d.summary, "\n") || len(d.examples) == 0 {
				t.Errorf("%s: summary %q, %d examples; want one line and an example", name, d.summary, len(d.examples))
			}
		}
		// --count stays a synonym.
		if code, out, _ := cli(t, "bucket", "--key", "user-123", "--count", "10"); code != 0 || strings.TrimSpace(out) != "8" {
			t.Errorf("bucket --count 10: exit %d, %q", code, out)
		}
	})
}
