//go:build spillway.ops

package main

import (
	"strings"
	"testing"
)

func TestOperatorBuildRefusesTheLocalCommands(t *testing.T) {
	for command := range localCommands {
		code, _, errs := cli(t, command)
		if code != 2 || !strings.Contains(errs, "operator build") || !strings.Contains(errs, "go run ./cmd/spillway "+command) {
			t.Errorf("%s: exit %d, stderr %q; want 2, naming the build and the way to a default one", command, code, errs)
		}
	}
	_, out, _ := cli(t, "help")
	if strings.Count(out, "(not in the operator build)") != len(localCommands) {
		t.Errorf("help does not mark the %d local commands:\n%s", len(localCommands), out)
	}
}
