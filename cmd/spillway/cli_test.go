package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func cli(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = runCLI(t.Context(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// cliTable starts an embedded DynamoDB, creates a table on it through the
// CLI (create-table given extra, such as --bucket-count) and returns the
// server, the table and the connection flags. The CLI tests need the
// embedded server (external endpoints are covered by the store tests).
func cliTable(t *testing.T, extra ...string) (*outboxlocal.DynamoDB, string, []string) {
	t.Helper()
	ddb := outboxtest.NewDynamoDB(t)
	if ddb.External {
		t.Skip("the CLI test creates its table through the CLI; external endpoints are covered by the store tests")
	}
	table := ddb.NewTableName()
	ddb.DeleteOnClose(table)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_PROFILE", "")
	flags := []string{"--dynamodb-endpoint", ddb.Endpoint, "--table", table}
	if code, out, errs := cli(t, append(append([]string{"create-table"}, flags...), extra...)...); code != 0 {
		t.Fatalf("create-table: exit %d: %s %s", code, out, errs)
	}
	return ddb, table, flags
}

func TestCLI(t *testing.T) {
	t.Run("BucketCommandMatchesTheGoldenVectors", func(t *testing.T) {
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"--key", "user-123", "--bucket-count", "10"}, "8"},
			{[]string{"--key", "user-123"}, "4"},
			{[]string{"--key", ""}, "1"},
			{[]string{"--key-base64", "AQID"}, "1"},
			{[]string{"--message-id", "3f2504e0-4f89-11d3-9a0c-0305e82c3301"}, "5"},
			{[]string{"--message-id", "3f2504e0-4f89-11d3-9a0c-0305e82c3301", "--count", "16"}, "13"},
			{[]string{"--partition", "13"}, "5"},
			{[]string{"--key", "abc", "--partition", "7", "--bucket-count", "3"}, "1"},
		} {
			code, out, errs := cli(t, append([]string{"bucket"}, c.args...)...)
			if code != 0 || strings.TrimSpace(out) != c.want {
				t.Errorf("bucket %v = %q (exit %d, %s), want %s", c.args, out, code, errs, c.want)
			}
		}
	})

	t.Run("BadInvocationsExitTwoWithAReason", func(t *testing.T) {
		for _, args := range [][]string{
			{"bucket"},
			{"bucket", "--key", "a", "--message-id", "3f2504e0-4f89-11d3-9a0c-0305e82c3301"},
			{"bucket", "--message-id", "not-a-uuid"},
			{"bucket", "--key-base64", "%%%"},
			{"bucket", "--key", "a", "--bucket-count", "0"},
			{"bucket", "--partition", "-3"},
			{"nonsense"},
			{"status", "--table", ""},
			{"run", "--messages", "0"},
			{"run", "--tracing", "jaeger"},
		} {
			code, _, errs := cli(t, args...)
			if code != 2 || errs == "" {
				t.Errorf("%v: exit %d, stderr %q; want 2 and a reason", args, code, errs)
			}
		}
		if code, out, _ := cli(t, "help"); code != 0 || !strings.Contains(out, "drain") {
			t.Errorf("help: exit %d\n%s", code, out)
		}
	})

	t.Run("OperatorCommandsAgainstAnEndpoint", func(t *testing.T) {
		ddb := outboxtest.NewDynamoDB(t)
		kafka := outboxtest.NewKafka(t, "orders", "payments")
		table := ddb.NewTableName()
		ddb.DeleteOnClose(table)
		flags := []string{"--dynamodb-endpoint", ddb.Endpoint, "--table", table}
		if ddb.External {
			t.Skip("the CLI test creates its table through the CLI; external endpoints are covered by the store tests")
		}
		t.Setenv("AWS_ACCESS_KEY_ID", "")
		t.Setenv("AWS_PROFILE", "")

		if code, out, errs := cli(t, append([]string{"create-table"}, flags...)...); code != 0 || !strings.Contains(out, "active") {
			t.Fatalf("create-table: exit %d: %s %s", code, out, errs)
		}
		code, out, errs := cli(t, append([]string{"enqueue", "--file", filepath.Join("..", "..", "events", "enqueue.batch.json")}, flags...)...)
		if code != 0 {
			t.Fatalf("enqueue: exit %d: %s %s", code, out, errs)
		}
		var resp struct {
			Messages []struct {
				MessageID string `json:"messageId"`
				Bucket    int    `json:"bucket"`
				Sequence  int64  `json:"sequence"`
			} `json:"messages"`
		}
		if err := json.Unmarshal([]byte(out), &resp); err != nil || len(resp.Messages) == 0 {
			t.Fatalf("enqueue output %q: %v", out, err)
		}
		n := len(resp.Messages)
		if code, out, _ := cli(t, append([]string{"enqueue", "--file", filepath.Join("..", "..", "events", "enqueue.missing-topic.json")}, flags...)...); code != 1 || !strings.Contains(out, `"field"`) {
			t.Fatalf("invalid enqueue: exit %d, output %s; want 1 and the field", code, out)
		}

		var st statusView
		code, out, errs = cli(t, append([]string{"status", "--json"}, flags...)...)
		if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
			t.Fatalf("status: exit %d: %s %s", code, out, errs)
		}
		if st.Pending != int64(n) || len(st.Buckets) != 8 || len(st.Relays) != 0 {
			t.Fatalf("status before drain: %+v, want %d pending over 8 buckets and no relay", st, n)
		}

		code, out, errs = cli(t, append([]string{"drain", "--brokers", strings.Join(kafka.Brokers, ","), "--timeout", "60s", "--relays", "2"}, flags...)...)
		if code != 0 || !strings.Contains(out, "0 pending") {
			t.Fatalf("drain: exit %d: %s %s", code, out, errs)
		}
		got := outboxtest.ConsumeAll(t, kafka, kafka.Topic("orders"))
		got = append(got, outboxtest.ConsumeAll(t, kafka, kafka.Topic("payments"))...)
		if len(got) < n {
			t.Fatalf("consumed %d records, want at least %d", len(got), n)
		}

		code, out, _ = cli(t, append([]string{"status"}, flags...)...)
		if code != 0 || !strings.Contains(out, "0 pending") || !strings.Contains(out, "stopped") {
			t.Fatalf("status after drain: exit %d:\n%s", code, out)
		}
	})

	t.Run("VersionNamesTheBuildAndGo", func(t *testing.T) {
		code, out, errs := cli(t, "version")
		if code != 0 || !strings.HasPrefix(out, "spillway ") || !strings.Contains(out, runtime.Version()) {
			t.Fatalf("version: exit %d, %q %q; want the version and %s", code, out, errs, runtime.Version())
		}
		defer func(v string) { version = v }(version)
		version = "v0.1.0-3-gabcdef"
		if _, out, _ := cli(t, "version"); !strings.HasPrefix(out, "spillway v0.1.0-3-gabcdef (go") {
			t.Errorf("version with -X main.version: %q", out)
		}
	})

	// ErrorsNameTheFlag: configuration errors name the flag first and the
	// variable as the other way to set it, in a sentence without package
	// prefixes.
	t.Run("ErrorsNameTheFlag", func(t *testing.T) {
		t.Setenv(outboxconf.EnvTable, "")
		t.Setenv(outboxconf.EnvBucketCount, "")
		t.Setenv("AWS_REGION", "eu-west-1") // else drain names the missing region first
		for _, c := range []struct {
			args []string
			want string
		}{
			{[]string{"status"}, "spillway status: --table is required (or set SPILLWAY_TABLE)\n"},
			{[]string{"status", "--table", "t", "--bucket-count", "0"}, "spillway status: --bucket-count 0: must be between 1 and 2147483647\n"},
			{[]string{"parked", "list", "--table", "t", "--count", "-1"}, "spillway parked: --bucket-count -1: must be between 1 and 2147483647\n"},
			{[]string{"bucket", "--key", "a", "--bucket-count", "0"}, "spillway bucket: --bucket-count must be at least 1, got 0\n"},
			{[]string{"drain", "--table", "t"}, "spillway drain: --brokers is required by the relay: list the seed brokers as host:port,host:port (or set SPILLWAY_KAFKA_BROKERS)\n"},
			{[]string{"drain", "--tablex", "t"}, "spillway drain: unknown flag --tablex; did you mean --table? (spillway help drain lists the flags)\n"},
			{[]string{"help", "nonsense"}, "spillway help: unknown command \"nonsense\"; spillway help lists them\n"},
		} {
			code, _, errs := cli(t, c.args...)
			if code != 2 || errs != c.want {
				t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errs, c.want)
			}
		}
		t.Setenv(outboxconf.EnvBucketCount, "abc")
		if _, _, errs := cli(t, "status", "--table", "t"); errs != "spillway status: SPILLWAY_BUCKET_COUNT=\"abc\", the default of --bucket-count: not a decimal integer\n" {
			t.Errorf("a bad variable: %q", errs)
		}
	})

	t.Run("FailuresReadWithoutPackagePrefixes", func(t *testing.T) {
		if got := forOperator(fmt.Errorf("outboxddb: read coordination partition: %w", errors.New("outbox: misconfigured"))); got != "read coordination partition: outbox: misconfigured" {
			t.Errorf("forOperator = %q", got)
		}
		t.Setenv("AWS_ACCESS_KEY_ID", "")
		t.Setenv("AWS_PROFILE", "")
		code, _, errs := cli(t, "status", "--table", "t", "--dynamodb-endpoint", "http://127.0.0.1:1")
		if code != 1 || !strings.HasPrefix(errs, "spillway status: read LAYOUT of \"OUTBOX#COORDINATION\"") {
			t.Errorf("status against a closed port: exit %d, %q; want 1 and what failed, without the package", code, errs)
		}
	})

	// VersionReadsTheBuildInformation: without -X main.version, the module
	// version and the VCS stamp go install and go build record are printed,
	// and a build with neither says how to get them.
	t.Run("VersionReadsTheBuildInformation", func(t *testing.T) {
		stamp := []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: "649a14a83eeeca21b74e5d645a0dd2de6656b72c"},
			{Key: "vcs.time", Value: "2026-12-02T17:27:36Z"}, {Key: "vcs.modified", Value: "true"}}
		for _, c := range []struct {
			main     string
			settings []debug.BuildSetting
			want     string
		}{
			{"v0.3.0", nil, "v0.3.0"},
			{"v0.0.0-20261202172736-649a14a83eee+dirty", stamp, "v0.0.0-20261202172736-649a14a83eee+dirty"},
			{"v0.3.0", stamp, "v0.3.0, 649a14a83eee-dirty 2026-12-02T17:27:36Z"},
			{"(devel)", stamp, "devel 649a14a83eee-dirty 2026-12-02T17:27:36Z"},
			{"(devel)", nil, "devel, no VCS stamp (make cli names the build; so do go install …@version and go build in a git clone unless -buildvcs=false)"},
		} {
			info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/spillway-dev/spillway", Version: c.main}, Settings: c.settings}
			if got := versionFromBuildInfo(info); got != c.want {
				t.Errorf("version of %s %v = %q, want %q", c.main, c.settings, got, c.want)
			}
		}
		if got := versionFromBuildInfo(nil); got != "devel (no build information)" {
			t.Errorf("without build information: %q", got)
		}
	})
}
