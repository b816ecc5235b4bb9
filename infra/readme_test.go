package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aws/aws-cdk-go/awscdk/v2"
	"github.com/aws/jsii-runtime-go"
)

// shBlock matches a fenced sh block of a markdown file.
var shBlock = regexp.MustCompile("(?s)```sh\n(.*?)```")

// cdkCommand is one `cdk synth` or `cdk deploy` command of a markdown file.
type cdkCommand struct {
	line    string
	context map[string]any
}

// cdkCommands returns the cdk synth and deploy commands of a markdown file's
// sh blocks (continuation lines joined) with their -c keys, and whether the
// file says to install the CDK CLI (npm ci --prefix infra) before them.
func cdkCommands(t *testing.T, path string) ([]cdkCommand, bool) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []cdkCommand
	installed, installedFirst := false, true
	for _, block := range shBlock.FindAllStringSubmatch(string(raw), -1) {
		joined := strings.ReplaceAll(block[1], "\\\n", " ")
		for _, line := range strings.Split(joined, "\n") {
			line = strings.TrimSpace(strings.SplitN(line, "#", 2)[0])
			if strings.Contains(line, "npm ci --prefix infra") {
				installed = true
			}
			fields := strings.Fields(line)
			if len(fields) < 2 || !strings.HasSuffix(fields[0], "node_modules/.bin/cdk") || (fields[1] != "synth" && fields[1] != "deploy") {
				continue
			}
			installedFirst = installedFirst && installed
			cmd := cdkCommand{line: line, context: map[string]any{}}
			for i := 2; i < len(fields); i++ {
				if fields[i] != "-c" || i+1 == len(fields) {
					continue
				}
				k, v, ok := strings.Cut(fields[i+1], "=")
				if !ok {
					t.Errorf("%s: -c %s is not key=value", path, fields[i+1])
				}
				cmd.context[k] = v
			}
			cmds = append(cmds, cmd)
		}
	}
	return cmds, installed && installedFirst
}

func TestReadme(t *testing.T) {
	// The deploy commands of both READMEs work as written: each synthesizes
	// with exactly its own -c keys on top of cdk.json, the packages of `make
	// build` standing in for dist/.
	t.Run("DeployCommandsSynthesize", func(t *testing.T) {
		for _, path := range []string{"README.md", filepath.Join("..", "README.md")} {
			cmds, installs := cdkCommands(t, path)
			deploys := 0
			for _, c := range cmds {
				if strings.Contains(c.line, " deploy") {
					deploys++
				}
			}
			if deploys == 0 {
				t.Errorf("%s has no cdk deploy command", path)
			}
			if !installs {
				t.Errorf("%s does not say to run npm ci --prefix infra before its cdk commands", path)
			}
			for _, c := range cmds {
				ctx := cdkJSONContext(t)
				for k, v := range c.context {
					ctx[k] = v
				}
				ctx["distDir"] = placeholderDist(t)
				app := awscdk.NewApp(&awscdk.AppProps{Outdir: jsii.String(t.TempDir()), Context: &ctx})
				if _, err := newApp(app); err != nil {
					t.Errorf("%s: %s\nfails: %v", path, c.line, err)
					continue
				}
				app.Synth(nil)
			}
		}
	})
}
