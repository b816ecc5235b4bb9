// Command spillway is the operator CLI of Spillway: it runs the whole system
// on embedded backends, creates the table, enqueues messages, shows the state
// of the leases and the backlog, drains the outbox and tells which bucket a
// message lands in.
//
// Built with -tags spillway.ops (make cli), it is the operator build: it
// leaves out run and bench, the only commands that need the embedded
// DynamoDB server and Kafka cluster, the Lambda emulator and the
// simulations, and with them those packages.
//
// Usage:
//
//	spillway <command> [flags]
//
// Run `spillway help` for the commands and `spillway <command> -h` for a
// command's flags. Every command reads the same environment variables as the
// Lambda functions (SPILLWAY_TABLE, SPILLWAY_DYNAMODB_ENDPOINT, ...); flags
// override them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
)

// command is one subcommand.
type command struct {
	summary string
	run     runFunc
}

// localCommands run on the embedded backends, which the operator build
// (-tags spillway.ops) leaves out.
var localCommands = map[string]bool{"bench": true, "run": true}

// commands lists every subcommand in one place, so the usage text and the
// dispatch cannot disagree and no file registers itself from init.
var commands = map[string]command{
	"bench":        {"measure throughput, DynamoDB cost per message, idle cost and latency; print the table", runBench},
	"bucket":       {"print the bucket a message lands in", runBucket},
	"create-table": {"create the outbox table if it does not exist and wait until it is active", runCreateTable},
	"drain":        {"relay until the outbox is empty (exit 0) or --timeout passes (exit 1)", runDrain},
	"enqueue":      {"store messages given as the enqueue function's JSON (from a file or stdin)", runEnqueue},
	"generation":   {"show, seal or finish the retirement of a generation (key prefix and bucket count)", runGeneration},
	"parked":       {"list, replay or drop messages quarantined under SPILLWAY_POISON_POLICY=quarantine", runParked},
	"version":      {"print the version of this build and the Go version", runVersion},
	"run":          {"run the whole system on embedded DynamoDB and Kafka with a demo workload", runRun},
	"status":       {"show each bucket's backlog and lease, and the relays' heartbeats", runStatus},
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(runCLI(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// runCLI dispatches args and returns the exit code: 0 on success, 2 for a
// usage error, 1 for any other failure.
func runCLI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "spillway: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	err := cmd.run(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "spillway %s: %v\n", args[0], err)
		return 2
	default:
		fmt.Fprintf(stderr, "spillway %s: %v\n", args[0], err)
		return 1
	}
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Spillway: a serverless transactional outbox from DynamoDB to Kafka.")
	fmt.Fprintln(w, "\nUsage: spillway <command> [flags]\n\nCommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		summary := commands[n].summary
		if localCommands[n] && opsBuild {
			summary = "(not in the operator build) " + summary
		}
		fmt.Fprintf(w, "  %-13s %s\n", n, summary)
	}
	fmt.Fprintln(w, "\nRun 'spillway <command> -h' for a command's flags.")
}

// runFunc runs a command or subcommand on its arguments.
type runFunc = func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// subcommand is one verb of a command with verbs (parked, generation).
type subcommand struct {
	name string
	run  runFunc
}

// dispatch runs the verb args[0] names among subs, or explains the command's
// synopsis: a missing or unknown verb is a usage error, -h prints the
// synopsis.
func dispatch(ctx context.Context, command, synopsis string, subs []subcommand, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return usagef("usage: spillway %s", synopsis)
	}
	names := make([]string, len(subs))
	for i, sub := range subs {
		if sub.name == args[0] {
			return sub.run(ctx, args[1:], stdout, stderr)
		}
		names[i] = sub.name
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprintf(stderr, "Usage: spillway %s\n", synopsis)
		return flag.ErrHelp
	}
	return usagef("unknown %s command %q; want %s", command, args[0], strings.Join(names, ", "))
}

// usageError marks a bad invocation (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: spillway %s\n\nFlags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args and turns flag errors into usage errors.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}
