package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"
)

func TestFlags(t *testing.T) {
	// A mistyped command, verb or flag is refused with the nearest one, in
	// one line; a word near nothing gets the list instead.
	t.Run("MistakesNameTheNearestCommandOrFlag", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"stauts"}, "spillway: unknown command \"stauts\"; did you mean status? (spillway help lists them)\n"},
			{[]string{"help", "drian"}, "spillway help: unknown command \"drian\"; did you mean drain? (spillway help lists them)\n"},
			{[]string{"parked", "relpay"}, "spillway parked: unknown parked command \"relpay\"; did you mean replay? (want list, replay, drop)\n"},
			{[]string{"status", "--tabel", "t"}, "spillway status: unknown flag --tabel; did you mean --table? (spillway help status lists the flags)\n"},
			{[]string{"drain", "-verbos"}, "spillway drain: unknown flag -verbos; did you mean --verbose? (spillway help drain lists the flags)\n"},
			{[]string{"status", "--frobnicate"}, "spillway status: unknown flag --frobnicate (spillway help status lists the flags)\n"},
		} {
			code, out, errs := cli(t, c.args...)
			if code != 2 || out != "" || errs != c.want {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out, errs, c.want)
			}
		}
		if code, _, errs := cli(t, "frobnicate"); code != 2 || !strings.Contains(errs, "unknown command \"frobnicate\"; spillway help lists them") || !strings.Contains(errs, "Commands:") {
			t.Errorf("a command near nothing: exit %d, %q; want 2 and the list", code, errs)
		}
	})

	// A value that does not parse says what a good one looks like, naming
	// the flag as the user wrote it.
	t.Run("BadValuesSayWhatIsExpected", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"drain", "--table", "t", "--timeout", "5"}, "spillway drain: --timeout 5: want a duration with its unit, like 30s, 5m or 1h30m\n"},
			{[]string{"drain", "--table", "t", "--timeout=5"}, "spillway drain: --timeout 5: want a duration with its unit, like 30s, 5m or 1h30m\n"},
			{[]string{"bucket", "--key", "a", "--bucket-count", "many"}, "spillway bucket: --bucket-count many: want a whole number\n"},
			{[]string{"bucket", "--key", "a", "--count", "99999999999999999999"}, "spillway bucket: --count 99999999999999999999: out of range\n"},
			{[]string{"status", "--json=maybe"}, "spillway status: --json maybe: want true or false\n"},
			{[]string{"drain", "--table", "t", "--retry"}, "spillway drain: --retry needs a value: a duration with its unit, like 30s, 5m or 1h30m (spillway help drain)\n"},
			{[]string{"status", "--table"}, "spillway status: --table needs a value: NAME (spillway help status)\n"},
			{[]string{"status", "extra"}, "spillway status: unexpected argument \"extra\" (spillway help status lists the flags)\n"},
		} {
			code, out, errs := cli(t, c.args...)
			if code != 2 || out != "" || errs != c.want {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out, errs, c.want)
			}
		}
	})

	// -v and --verbose are one flag (and --v, -verbose, -v=true, as package
	// flag would take them); values may follow a flag or an =, after one
	// dash or two.
	t.Run("OneAndTwoDashesSpellTheSameFlag", func(t *testing.T) {
		for _, args := range [][]string{{"-v"}, {"--verbose"}, {"--v"}, {"-verbose"}, {"-v=true"}} {
			fs := newFlagSet("status", io.Discard)
			v := fs.verbose("log")
			d := fs.Duration("retry", time.Second, "wait")
			if err := parse(fs, append(args, "-retry=2s")); err != nil || !*v || *d != 2*time.Second {
				t.Errorf("%v: verbose %v, retry %v, %v", args, *v, *d, err)
			}
		}
		fs := newFlagSet("status", io.Discard)
		v := fs.verbose("log")
		table := fs.String("table", "", "the table")
		if err := parse(fs, []string{"--table", "-odd-name-", "--"}); err != nil || *table != "-odd-name-" || *v {
			t.Errorf("a value starting with a dash: table %q, verbose %v, %v", *table, *v, err)
		}
		if err := parse(fs, []string{"--", "positional"}); err == nil {
			t.Errorf("an argument after -- was taken")
		}
	})

	// run's --timeout was one relay invocation's deadline, drain's the
	// whole drain: run's is --relay-timeout now, and the old name still
	// works with a notice on stderr.
	t.Run("RunsTimeoutIsDeprecatedForRelayTimeout", func(t *testing.T) {
		var stderr bytes.Buffer
		f, err := parseRunFlags([]string{"--timeout", "3s"}, io.Discard, &stderr)
		if err != nil || f.timeout != 3*time.Second {
			t.Fatalf("--timeout 3s: %v, %v", f.timeout, err)
		}
		if want := "spillway run: --timeout is deprecated: use --relay-timeout, each relay invocation's deadline (drain's --timeout bounds the whole drain)\n"; stderr.String() != want {
			t.Errorf("notice %q, want %q", stderr.String(), want)
		}
		stderr.Reset()
		if f, err := parseRunFlags([]string{"--relay-timeout", "4s"}, io.Discard, &stderr); err != nil || f.timeout != 4*time.Second || stderr.Len() != 0 {
			t.Errorf("--relay-timeout 4s: %v, %v, notice %q", f.timeout, err, stderr.String())
		}
	})
}
