package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// helpDoc is what `spillway help <command>` and `<command> -h` print.
type helpDoc struct {
	// summary is one line, also shown in the command list.
	summary string
	// synopsis follows "Usage: spillway ".
	synopsis string
	// examples are command lines to copy.
	examples []string
	// details, when set, is a paragraph printed after the usage line:
	// what the command guarantees beyond its summary.
	details string
}

// conn is the connection part of the examples.
const conn = "--table orders-outbox"

// docs holds the help of every command and verb ("parked replay"), in one
// place so the list, the usage lines and the examples cannot disagree.
var docs = map[string]helpDoc{
	"bench": {"measure relay throughput, commit-to-acknowledgement latency and a relay's memory, on the embedded backends or your endpoints",
		"bench [--scenario NAME,...] [--cases r1-b8-v1024,...] [--messages N] [--value-sizes S,...] [--memory-mb M,...] [--drain-command EXE] [--json] [--profile-dir DIR] [--dynamodb-latency D --kafka-latency D [--latency-jitter P%]] [--dynamodb-endpoint URL] [--brokers HOST:PORT]",
		[]string{"spillway bench --scenario latency --messages 200", "spillway bench --scenario throughput,latency --dynamodb-latency 5ms --kafka-latency 10ms --latency-jitter 20%", "spillway bench --scenario memory --value-sizes 395K --memory-mb 128", "spillway bench --dynamodb-endpoint http://127.0.0.1:8000 --brokers localhost:9092 --json > bench.json"}, ""},
	"bucket": {"print the bucket a message lands in",
		"bucket (--key K | --key-base64 B | --message-id UUID | --partition P) [--bucket-count N] [--json]",
		[]string{"spillway bucket --key customer-42 --bucket-count 16", "spillway bucket --message-id 3f2504e0-4f89-11d3-9a0c-0305e82c3301"}, ""},
	"create-table": {"create the outbox table if it does not exist, record its layout and wait until it is active",
		"create-table --table NAME [--dynamodb-endpoint URL] [--key-prefix P] [--bucket-count N] [--wait D] [--progress D]",
		[]string{"spillway create-table " + conn, "spillway create-table " + conn + " --bucket-count 32", "spillway create-table --table demo --dynamodb-endpoint http://127.0.0.1:8000"},
		`A new table gets a layout record of its key prefix and bucket count, which
every Spillway writer, relay and command checks its count against. On an
existing table the command checks the record, and says when there is none.`},
	"drain": {"relay until nothing is pending or marked for replay (exit 0) or --timeout passes (exit 1)",
		"drain --table NAME --brokers HOST:PORT [--bucket-count N] [--relays N] [--timeout D] [--json] [-v]",
		[]string{"spillway drain " + conn + " --brokers b-1.example:9092 --timeout 10m", "spillway drain " + conn + " --brokers localhost:9092 --relays 4 --json"},
		`Whatever SPILLWAY_POISON_POLICY says, the relays honour the parked messages:
a key with a parked message parks its later ones behind it, and messages
marked for replay (spillway parked replay) are published first. The policy
decides only what happens to a new message Kafka refuses: block retries it,
quarantine parks it. The summary says what is left: pending messages, parked
ones, the keys they hold back and the replays not yet done. Parked messages
that are not marked wait for an operator and do not fail the drain.`},
	"enqueue": {"store messages given as the enqueue function's JSON (from a file or stdin)",
		"enqueue --table NAME [--file FILE] [--bucket-count N] [-v]",
		[]string{"spillway enqueue " + conn + " --file events/enqueue.single.json", `echo '{"topic":"orders","key":"o-1","value":"hi"}' | spillway enqueue ` + conn},
		"Prints the function's response. Writes nothing when the request is not valid JSON (the error says where it breaks), " +
			"when the function refuses it (the response names the field), or when --bucket-count is not the count the table's layout record states " +
			"(without --bucket-count the command uses that count; on a table without a record, when the table's items show another count, as status warns)."},
	"generation": {"show, seal or finish the retirement of a generation (key prefix and bucket count)",
		"generation status|seal|finish --previous-key-prefix P --previous-bucket-count N [--key-prefix P] [--bucket-count N]",
		[]string{"spillway generation status " + conn + " --previous-key-prefix OUTBOX --previous-bucket-count 8 --key-prefix OUTBOX2 --bucket-count 32"}, ""},
	"generation status": {"show both generations' phase, pending and parked counts, and the next step",
		"generation status --previous-key-prefix P --previous-bucket-count N [--key-prefix P] [--bucket-count N] [--json]",
		[]string{"spillway generation status " + conn + " --previous-key-prefix OUTBOX --previous-bucket-count 8 --key-prefix OUTBOX2 --bucket-count 32"}, ""},
	"generation seal": {"seal the previous generation, the writers' switch point, once every writer has both generations (a dry run without --yes)",
		"generation seal --previous-key-prefix P --previous-bucket-count N [--key-prefix P] [--bucket-count N] [--yes]",
		[]string{"spillway generation seal " + conn + " --previous-key-prefix OUTBOX --previous-bucket-count 8 --key-prefix OUTBOX2 --bucket-count 32 --yes"}, ""},
	"generation finish": {"mark a sealed previous generation drained once it is empty",
		"generation finish --previous-key-prefix P --previous-bucket-count N [--key-prefix P] [--bucket-count N]",
		[]string{"spillway generation finish " + conn + " --previous-key-prefix OUTBOX --previous-bucket-count 8 --key-prefix OUTBOX2 --bucket-count 32"}, ""},
	"help": {"show the commands, or a command's flags and examples",
		"help [command [verb]]",
		[]string{"spillway help drain", "spillway help parked replay"}, ""},
	"inbox": {"re-drive an inbox consumer's dead letters once their cause is fixed",
		"inbox redrive [flags]",
		[]string{"spillway inbox redrive --brokers b-1.example:9092", "spillway inbox redrive --brokers b-1.example:9092 --topic orders.dlq --yes"}, ""},
	"inbox redrive": {"send dead letters from {topic}.dlq back to their topic, or to another, once their cause is fixed (a dry run without --yes)",
		"inbox redrive --brokers HOST:PORT [--topic T.dlq,...] [--to T] [--group G] [--yes] [--json]",
		[]string{"spillway inbox redrive --brokers b-1.example:9092", "spillway inbox redrive --brokers b-1.example:9092 --topic orders.dlq --yes",
			"spillway inbox redrive --brokers b-1.example:9092 --topic orders.dlq --to orders-v2 --yes"},
		`A dead letter goes back to the topic and partition it was dead-lettered
from (its x-spillway-source header; else the dead-letter topic's name
without .dlq), with its key, value and headers but not the dead-lettering's
own x-spillway-* headers, a key's records in their order. Its consumer runs
it again and, since its marker says dead-lettered, applies it once; every
other consumer group that applied it skips it as a duplicate. With --to,
the one --topic's records go to that topic instead, each to its key's
partition there (where Kafka's default partitioner and the relay put the
key), so a key's records stay in one partition, behind those already there.
The offsets of --group (default spillway-redrive) say how far each
dead-letter partition was re-driven: --yes commits them after the records
were acknowledged, so a second run sends only dead letters added since.
Kafka's authentication comes from SPILLWAY_KAFKA_AUTH, SPILLWAY_KAFKA_TLS and
SPILLWAY_KAFKA_SCRAM_SECRET_ARN, as for the relay.`},
	"layout": {"record a table's bucket count, remove lease items beyond it, move messages stranded beyond it, restamp messages of another count",
		"layout record|prune|rehome|restamp [flags]",
		[]string{"spillway layout record " + conn + " --bucket-count 8", "spillway layout prune " + conn + " --yes"},
		`A table's layout record states the bucket count of each key prefix; every
Spillway writer, relay and command checks its count against it before it
writes (docs/operations.md#the-layout-record). create-table and the CDK stack
write it; a table created before it gets it from layout record.`},
	"layout record": {"state the bucket count of a table created before the layout record (a dry run without --yes)",
		"layout record --table NAME --bucket-count N [--key-prefix P] [--yes]",
		[]string{"spillway layout record " + conn + " --bucket-count 8", "spillway layout record " + conn + " --bucket-count 8 --yes"},
		`State the count the table's relays use. The dry run shows what the table's
items say (messages beyond the count or stamped with another one, lease items
beyond it); a count the running relays contradict is refused. A record never
changes: a new count needs a new generation.`},
	"layout prune": {"remove the lease items beyond the recorded bucket count (a dry run without --yes)",
		"layout prune --table NAME [--key-prefix P] [--yes]",
		[]string{"spillway layout prune " + conn, "spillway layout prune " + conn + " --yes"},
		`A relay or drain run with a larger count leaves lease items beyond the
table's count; every check ignores them. Each is removed only while no relay
holds it: one a running relay with a larger count holds is named (exit 1).`},
	"layout rehome": {"move messages stranded beyond the recorded bucket count into their buckets (a dry run without --yes)",
		"layout rehome --table NAME [--key-prefix P] [--up-to B] [--yes]",
		[]string{"spillway layout rehome " + conn, "spillway layout rehome " + conn + " --yes"},
		`A writer with a larger count (before the table had a layout record, or one
that does not check it) leaves messages in buckets no relay reads. Rehome
enqueues them again, in their order and with their ids, into the buckets the
recorded count gives them, then deletes them; run again after an
interruption (consumers drop the repeats on the message id).`},
	"layout restamp": {"let relays publish messages written with another bucket count within the recorded one (a dry run without --yes)",
		"layout restamp --table NAME [--key-prefix P] [--yes]",
		[]string{"spillway layout restamp " + conn, "spillway layout restamp " + conn + " --yes"},
		`A relay stops at a message stamped with another bucket count than its own.
Restamp rewrites the stamp of every such message of the table's buckets to the
recorded count (reading each bucket whole, one conditional update per message):
relays then publish them where they are, in their bucket's order. A writer
whose count is a multiple of the table's (16 of 8) put each of them where the
table's count puts it, so their keys keep their order; the command counts
those it finds elsewhere. Fix the writer first.`},
	"parked": {"list, replay or drop messages quarantined under SPILLWAY_POISON_POLICY=quarantine",
		"parked list|replay|drop [flags]",
		[]string{"spillway parked list " + conn, "spillway parked replay " + conn + " --all"}, ""},
	"parked list": {"list the parked messages with their reason and attempts",
		"parked list --table NAME [--bucket B] [--json]",
		[]string{"spillway parked list " + conn, "spillway parked list " + conn + " --bucket 3 --json"}, ""},
	"parked replay": {"mark parked messages for replay, each key's before its later messages (a dry run without --yes)",
		"parked replay --table NAME (--message-id ID | --key-base64 K | --all) [--topic T] [--yes] [-v]",
		[]string{"spillway parked replay " + conn + " --all", "spillway parked replay " + conn + " --message-id 3f2504e0-4f89-11d3-9a0c-0305e82c3301 --topic orders-v2 --yes"},
		`Replay marks parked messages; it moves nothing. The relay holding each
bucket publishes a key's marked messages in their original order, before any
later message of the key (also one committed after the park), then deletes
them; relays run by the schedule, a wake-up or drain pick the request up
within a lease renewal interval, whatever their poison policy. With
--relay-function (or SPILLWAY_RELAY_FUNCTION) the command wakes that
function for the marked buckets. A key with an unmarked parked message keeps
parking its later messages. Running a replay again after an interruption
marks the rest; nothing is lost, doubled or reordered (Kafka may see a
replayed message twice, with one message id).`},
	"parked drop": {"delete one parked message for good",
		"parked drop --table NAME --message-id ID --yes",
		[]string{"spillway parked drop " + conn + " --message-id 3f2504e0-4f89-11d3-9a0c-0305e82c3301 --yes"}, ""},
	"run": {"run the whole system on embedded DynamoDB and Kafka with a demo workload",
		"run [--messages N] [--keys N] [--concurrency N] [--relay-timeout D] [--tracing off|otel] [--dynamodb-endpoint URL] [--serve] [--topics T,...] [--json] [-v]",
		[]string{"spillway run", "spillway run --messages 20000 --concurrency 8", "spillway run --serve", "spillway run --serve --topics shipments",
			"spillway run --dynamodb-endpoint http://127.0.0.1:8000"}, ""},
	"status": {"show each bucket's backlog, parked messages and lease, and the relays' heartbeats",
		"status --table NAME [--dynamodb-endpoint URL] [--bucket-count N] [--json] [-v]",
		[]string{"spillway status " + conn, "spillway status --table demo --dynamodb-endpoint http://127.0.0.1:8000 --json"}, ""},
	"version": {"print the version of this build and the Go version",
		"version",
		[]string{"spillway version"}, ""},
}

// printHelp prints name's summary, usage, flags (when fs is not nil) or
// verbs, and examples.
func printHelp(w io.Writer, name string, fs *flag.FlagSet, verbs []string) {
	d := docs[name]
	fmt.Fprintf(w, "spillway %s: %s.\n\nUsage: spillway %s\n", name, d.summary, d.synopsis)
	if d.details != "" {
		fmt.Fprintf(w, "\n%s\n", d.details)
	}
	if fs != nil {
		var rows []string
		fs.VisitAll(func(f *flag.Flag) {
			if _, ok := f.Value.(alias); ok {
				return
			}
			arg, usage := flag.UnquoteUsage(f)
			switch arg {
			case "":
			case "int":
				arg = " N"
			default:
				arg = " " + strings.ToUpper(arg)
			}
			if def := f.DefValue; def != "" && def != "0" && def != "false" && def != "0s" && def != "-1" {
				usage += fmt.Sprintf(" (default %s)", def)
			}
			name := "--" + f.Name
			if short := shortOf(fs, f.Name); short != "" {
				name = "-" + short + ", " + name
			}
			rows = append(rows, fmt.Sprintf("  %s%s\t%s\n", name, arg, usage))
		})
		if len(rows) > 0 {
			fmt.Fprintln(w, "\nFlags:")
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, r := range rows {
				fmt.Fprint(tw, r)
			}
			tw.Flush()
		}
	}
	if len(verbs) > 0 {
		fmt.Fprintln(w, "\nCommands:")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, v := range verbs {
			fmt.Fprintf(tw, "  %s\t%s\n", v, docs[name+" "+v].summary)
		}
		tw.Flush()
	}
	if len(d.examples) > 0 {
		fmt.Fprintln(w, "\nExamples:")
		for _, e := range d.examples {
			fmt.Fprintf(w, "  %s\n", e)
		}
	}
}

// runHelp prints the command list, or the help of the command (and verb)
// args name, as `<command> [verb] -h` does.
func runHelp(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		usage(stdout)
		return nil
	}
	if args[0] == "help" {
		printHelp(stdout, "help", nil, nil)
		return nil
	}
	run, ok := commands[args[0]]
	if !ok {
		return unknownCommand(args[0])
	}
	return run(ctx, append(slices.Clone(args[1:]), "-h"), stdout, stderr)
}
