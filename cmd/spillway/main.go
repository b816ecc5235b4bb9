// Command spillway is the operator CLI of Spillway: it runs the whole system
// on embedded backends, creates the table, enqueues messages, shows the state
// of the leases and the backlog, drains the outbox, re-drives an inbox
// consumer's dead letters and tells which bucket a message lands in.
//
// Usage:
//
//	spillway <command> [flags]
//
// Run `spillway help` for the commands and `spillway help <command>` (or
// `spillway <command> -h`) for a command's flags and examples. Every command reads the same environment variables as the
// Lambda functions (SPILLWAY_TABLE, SPILLWAY_DYNAMODB_ENDPOINT, ...); flags
// override them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spillway-dev/spillway/internal/suggest"
)

// commands lists every subcommand in one place (their help is in docs), so
// the usage text and the dispatch cannot disagree and no file registers
// itself from init.
var commands = map[string]runFunc{
	"bench":        runBench,
	"bucket":       runBucket,
	"create-table": runCreateTable,
	"drain":        runDrain,
	"enqueue":      runEnqueue,
	"generation": verbs("generation", []subcommand{
		{"status", runGenerationStatus},
		{"seal", runGenerationSeal},
		{"finish", runGenerationFinish},
	}),
	"inbox": verbs("inbox", []subcommand{
		{"redrive", runInboxRedrive},
	}),
	"layout": verbs("layout", []subcommand{
		{"record", runLayoutRecord},
		{"prune", runLayoutPrune},
		{"rehome", runLayoutRehome},
		{"restamp", runLayoutRestamp},
	}),
	"parked": verbs("parked", []subcommand{
		{"list", runParkedList},
		{"replay", runParkedReplay},
		{"drop", runParkedDrop},
	}),
	"run":     runRun,
	"status":  runStatus,
	"version": runVersion,
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(runCLI(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// runCLI dispatches args and returns the exit code: 0 on success, 2 for a
// usage error, 1 for any other failure.
func runCLI(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "--help":
		args[0] = "help"
	case "--version":
		args[0] = "version"
	}
	run, ok := commands[args[0]]
	if args[0] == "help" {
		// Not in commands: runHelp looks commands up.
		run, ok = runHelp, true
	}
	if !ok {
		// With a suggestion, the one line says all; without, the list.
		fmt.Fprintf(stderr, "spillway: %v\n", unknownCommand(args[0]))
		if _, near := nearestCommand(args[0]); !near {
			fmt.Fprintln(stderr)
			usage(stderr)
		}
		return 2
	}
	err := run(ctx, args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, new(usageError)):
		fmt.Fprintf(stderr, "spillway %s: %v\n", args[0], err)
		return 2
	default:
		// A missing table or missing credentials say only that and the
		// fix, not the operation that met them.
		msg := explainSetup(err)
		if msg == "" {
			msg = forOperator(err)
		}
		fmt.Fprintf(stderr, "spillway %s: %s\n", args[0], msg)
		return 1
	}
}

// packagePrefix matches the package names Spillway's errors start with;
// the operator reads what failed, not where.
var packagePrefix = regexp.MustCompile(`^(outbox[a-z]*: )+`)

// forOperator is err's message without the leading package names.
func forOperator(err error) string {
	return packagePrefix.ReplaceAllString(err.Error(), "")
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "Spillway: a serverless transactional outbox from DynamoDB to Kafka.")
	fmt.Fprintln(w, "\nUsage: spillway <command> [flags]\n\nCommands:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, n := range slices.Sorted(slices.Values(append(slices.Collect(maps.Keys(commands)), "help"))) {
		fmt.Fprintf(tw, "  %s\t%s\n", n, docs[n].summary)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nRun 'spillway help <command>' for a command's flags and examples. Flags override the")
	fmt.Fprintln(w, "SPILLWAY_* environment variables the Lambda functions read.")
}

// runFunc runs a command or subcommand on its arguments.
type runFunc = func(ctx context.Context, args []string, stdout, stderr io.Writer) error

// subcommand is one verb of a command with verbs (parked, inbox, ...).
type subcommand struct {
	name string
	run  runFunc
}

// verbs is a command made of verbs (parked, inbox, ...).
func verbs(command string, subs []subcommand) runFunc {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return dispatch(ctx, command, subs, args, stdout, stderr)
	}
}

// dispatch runs the verb args[0] names among subs, or explains the
// command: a missing or unknown verb is a usage error, -h prints the verbs.
func dispatch(ctx context.Context, command string, subs []subcommand, args []string, stdout, stderr io.Writer) error {
	names := make([]string, len(subs))
	for i, sub := range subs {
		names[i] = sub.name
	}
	if len(args) == 0 {
		return usagef("want a command: %s (spillway help %s explains them)", strings.Join(names, ", "), command)
	}
	for _, sub := range subs {
		if sub.name == args[0] {
			return sub.run(ctx, args[1:], stdout, stderr)
		}
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printHelp(stdout, command, nil, names)
		fmt.Fprintf(stdout, "\nRun 'spillway help %s <command>' for a command's flags and examples.\n", command)
		return flag.ErrHelp
	}
	if near, ok := suggest.Nearest(args[0], names); ok {
		return usagef("unknown %s command %q; did you mean %s? (want %s)", command, args[0], near, strings.Join(names, ", "))
	}
	return usagef("unknown %s command %q; want %s", command, args[0], strings.Join(names, ", "))
}

// unknownCommand refuses name, naming the nearest command.
func unknownCommand(name string) error {
	if near, ok := nearestCommand(name); ok {
		return usagef("unknown command %q; did you mean %s? (spillway help lists them)", name, near)
	}
	return usagef("unknown command %q; spillway help lists them", name)
}

// usageError marks a bad invocation (exit code 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// nearestCommand returns the command name was likely meant to be.
func nearestCommand(name string) (string, bool) {
	names := append(slices.Collect(maps.Keys(commands)), "help")
	slices.Sort(names)
	return suggest.Nearest(name, names)
}
