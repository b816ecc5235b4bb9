package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"text/tabwriter"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxlambda"
)

// redriveClientID names the command to the brokers (quotas, logs).
const redriveClientID = "spillway-redrive"

// redriveOutput is what inbox redrive --json prints.
type redriveOutput struct {
	Applied bool                       `json:"applied"`
	Group   string                     `json:"group"`
	Routes  []outboxinbox.RedriveRoute `json:"routes"`
	Error   string                     `json:"error,omitempty"`
}

// runInboxRedrive sends dead letters back to their topics, or to --to
// (outboxinbox.Redrive): a dry run that counts unless --yes.
func runInboxRedrive(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("inbox redrive", stdout)
	ef := (&endpointFlags{values: map[string]*string{}, names: map[string]string{}, fs: fs}).withBrokers()
	var topics topicList
	fs.Var(&topics, "topic", "dead-letter `TOPIC` to re-drive, repeatable or comma-separated (default every topic whose name ends in .dlq)")
	to := fs.String("to", "", "send the one --topic's records to `TOPIC` instead of their source topic, each to its key's partition there")
	group := fs.String("group", outboxinbox.DefaultRedriveGroup, "consumer `GROUP` whose committed offsets record how far each dead-letter partition was re-driven; it must have no members")
	yes := fs.Bool("yes", false, "produce the records and commit the group's offsets; without it, only count (a dry run)")
	asJSON := fs.Bool("json", false, "print the counts as JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := checkRedriveTo(*to, topics); err != nil {
		return err
	}
	opts, err := redriveClientOpts(ctx, ef)
	if err != nil {
		return err
	}
	rep, err := outboxinbox.Redrive(ctx, outboxinbox.RedriveConfig{
		ClientOpts: opts, Topics: topics, To: *to, Group: *group, Apply: *yes,
		Logger: slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if *asJSON {
		out := redriveOutput{Applied: rep.Applied, Group: *group, Routes: rep.Routes}
		if err != nil {
			out.Error = forOperator(err)
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if jerr := enc.Encode(out); jerr != nil {
			return jerr
		}
		return err
	}
	printRedrive(stdout, rep, *group)
	return err
}

// checkRedriveTo refuses a --to that does not name one other topic for
// one --topic.
func checkRedriveTo(to string, topics topicList) error {
	switch {
	case to == "":
		return nil
	case len(topics) != 1:
		return usagef("--to %s needs exactly one --topic: the dead-letter topic whose records go there", to)
	case to == topics[0]:
		return usagef("--to %s is the dead-letter topic itself", to)
	}
	if err := checkTopicName(to); err != nil {
		return usagef("--to %s: %v", to, err)
	}
	return nil
}

// redriveClientOpts connects as the relay does: --brokers (or
// SPILLWAY_KAFKA_BROKERS), and SPILLWAY_KAFKA_AUTH, SPILLWAY_KAFKA_TLS and
// the SCRAM secret from the environment.
func redriveClientOpts(ctx context.Context, ef *endpointFlags) ([]kgo.Opt, error) {
	env := ef.getenv()
	cfg, err := loadConfigWithoutTable(env)
	if err != nil {
		return nil, usageError{ef.explain(err)}
	}
	kcfg, err := kafkaConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	opts, err := kcfg.ConnectOpts()
	if err != nil {
		return nil, err
	}
	return append(opts, kgo.ClientID(redriveClientID)), nil
}

// printRedrive prints a count per dead-letter topic and what to do next.
func printRedrive(w io.Writer, rep outboxinbox.RedriveReport, group string) {
	if len(rep.Routes) == 0 {
		fmt.Fprintln(w, "No dead-letter topic found (none named, and no topic ends in .dlq).")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DEAD-LETTER TOPIC\tBACK TO\tDEAD LETTERS\tRE-DRIVEN")
	total, produced := 0, 0
	for _, r := range rep.Routes {
		to := r.Topic
		switch {
		case r.Records == 0:
			to = "-"
		case to == "":
			to = "(none named)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", r.DeadLetterTopic, to, r.Records, r.Produced)
		total, produced = total+r.Records, produced+r.Produced
	}
	tw.Flush()
	switch {
	case total == 0:
		fmt.Fprintf(w, "\nNothing to re-drive: no dead letter since group %s's last re-drive.\n", group)
	case !rep.Applied:
		fmt.Fprintf(w, "\nDry run: nothing produced or committed. Once the cause is fixed, run again with --yes to send %s back.\n", deadLetters(total))
	default:
		fmt.Fprintf(w, "\nRe-drove %d of %s; group %s committed past them, so a run again sends only new ones.\n", produced, deadLetters(total), group)
	}
}

// loadConfigWithoutTable loads the functions' configuration for a command
// that reaches only Kafka: the table, which the configuration requires, is
// not used.
func loadConfigWithoutTable(getenv func(string) string) (outboxlambda.Config, error) {
	return outboxlambda.LoadConfig(func(k string) string {
		if v := getenv(k); v != "" || k != outboxconf.EnvTable {
			return v
		}
		return "unused-by-redrive"
	})
}

// deadLetters is "1 dead letter" or "N dead letters".
func deadLetters(n int) string {
	if n == 1 {
		return "1 dead letter"
	}
	return fmt.Sprintf("%d dead letters", n)
}
