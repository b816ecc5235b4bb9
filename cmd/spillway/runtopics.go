package main

import (
	"fmt"
	"slices"
	"strings"
)

// topicList is run's --topics and inbox redrive's --topic: topic names,
// comma-separated, repeatable.
type topicList []string

func (l *topicList) String() string { return strings.Join(*l, ",") }

// Set adds the comma-separated names in v, refusing a name Kafka refuses.
func (l *topicList) Set(v string) error {
	for name := range strings.SplitSeq(v, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if err := checkTopicName(name); err != nil {
			return err
		}
		if !slices.Contains(*l, name) {
			*l = append(*l, name)
		}
	}
	return nil
}

// checkTopicName applies Kafka's rule for topic names: 1 to 249 of
// [a-zA-Z0-9._-], not "." or "..".
func checkTopicName(name string) error {
	if len(name) > 249 || name == "." || name == ".." {
		return fmt.Errorf("topic %q: Kafka takes 1 to 249 characters, and neither %q nor %q", name, ".", "..")
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic %q: Kafka takes only letters, digits, '.', '_' and '-'", name)
		}
	}
	return nil
}

// relayTopics are the topics the demo's functions accept
// (SPILLWAY_TOPICS): the demo's and --topics.
func (f runFlags) relayTopics() []string {
	out := slices.Clone(demoTopics)
	for _, t := range f.topics {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// kafkaTopics are the topics the embedded Kafka starts with: the relay's,
// the dead-letter topic of each (an inbox consumer's default checks it at
// start), and the demo consumer's dead-letter topic.
func (f runFlags) kafkaTopics() []string {
	var out []string
	add := func(t string) {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	for _, t := range f.relayTopics() {
		add(t)
		if !strings.HasSuffix(t, deadLetterSuffix) {
			add(t + deadLetterSuffix)
		}
	}
	add(inboxDemoDeadLetters)
	return out
}

// deadLetterSuffix makes a topic's dead-letter topic, as the inbox's
// consumer does by default.
const deadLetterSuffix = ".dlq"
