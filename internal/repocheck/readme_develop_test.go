package repocheck

import (
	"strings"
	"testing"
)

func TestReadmeDevelop(t *testing.T) {
	// The README's "Develop locally" section shows examples/local/main.go
	// verbatim (whose own test builds and runs it), and says what a newcomer
	// must run and export for it: the served backends, their variables, dummy
	// credentials and a region, and a relay.
	t.Run("LocallyIsTheTestedProgram", func(t *testing.T) {
		readme := readRepoFile(t, "README.md")
		start := strings.Index(readme, "\n## Develop locally\n")
		if start < 0 {
			t.Fatal(`README has no "## Develop locally" section`)
		}
		section := readme[start+1:]
		if end := strings.Index(section, "\n## "); end >= 0 {
			section = section[:end]
		}
		open := strings.Index(section, "```go\n")
		if open < 0 {
			t.Fatal("the section has no go block")
		}
		block := section[open+len("```go\n"):]
		block = block[:strings.Index(block, "```")]
		if program := readRepoFile(t, "examples/local/main.go"); block != program {
			t.Errorf("README's program differs from examples/local/main.go; copy the file into the README")
		}
		for _, want := range []string{"run --serve", "export SPILLWAY_DYNAMODB_ENDPOINT=", "SPILLWAY_KAFKA_BROKERS=", "SPILLWAY_TABLE=",
			"AWS_ACCESS_KEY_ID=", "AWS_SECRET_ACCESS_KEY=", "AWS_REGION=", "no EC2 IMDS role found", "go run ./examples/local", "spillway drain"} {
			if !strings.Contains(section, want) {
				t.Errorf("the Develop locally section lacks %q", want)
			}
		}
	})
}
