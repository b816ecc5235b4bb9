package repocheck

import (
	"regexp"
	"strings"
	"testing"
)

// goBlock matches a fenced Go block of a Markdown file.
var goBlock = regexp.MustCompile("(?s)```go\n(.*?)```")

func TestReadmeDevelop(t *testing.T) {
	// Every Go sample of the README is a run of whole lines of
	// examples/local/main.go, which its own test builds and runs against the
	// embedded backends, so a sample cannot drift from code that compiles
	// and works; the README links the program.
	t.Run("ReadmeSamplesAreTheTestedProgram", func(t *testing.T) {
		readme := readRepoFile(t, "README.md")
		program := "\n" + readRepoFile(t, "examples/local/main.go")
		blocks := goBlock.FindAllStringSubmatch(readme, -1)
		if len(blocks) < 2 {
			t.Fatalf("README has %d Go samples; want the write and the consume samples", len(blocks))
		}
		for _, b := range blocks {
			if !strings.HasSuffix(b[1], "\n") || !strings.Contains(program, "\n"+b[1]) {
				t.Errorf("README's sample is not lines of examples/local/main.go; copy them from the file:\n%s", b[1])
			}
		}
		if !strings.Contains(readme, "](examples/local/main.go)") {
			t.Errorf("README does not link examples/local/main.go, the program its samples come from")
		}
	})

	// docs/local.md says what a newcomer must run and export for that
	// program: the served backends, their variables, dummy credentials and a
	// region, and a relay.
	t.Run("LocalStepsSayWhatToRunAndExport", func(t *testing.T) {
		page := readRepoFile(t, "docs/local.md")
		for _, want := range []string{"run --serve", "export SPILLWAY_DYNAMODB_ENDPOINT=", "SPILLWAY_KAFKA_BROKERS=", "SPILLWAY_TABLE=",
			"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_REGION=", "no EC2 IMDS role found", "go run ./examples/local", "spillway drain",
			"](../examples/local/main.go)"} {
			if !strings.Contains(page, want) {
				t.Errorf("docs/local.md lacks %q", want)
			}
		}
		if !strings.Contains(readRepoFile(t, "README.md"), "docs/local.md") {
			t.Errorf("README does not point to docs/local.md")
		}
	})
}
