// Package outbox is the core of Spillway, a transactional outbox that moves
// messages from an Amazon DynamoDB table to Apache Kafka: a service commits
// its business change and a message in one DynamoDB transaction, and
// relays publish the messages to Kafka in per-key commit order, deleting
// each once the broker acknowledged it.
//
// # Writing
//
// Writers use the DynamoDB adapter, outboxddb, and this package's Message
// types:
//
//	writer, err := outboxwake.WriterFromEnv(awsCfg, os.Getenv, nil)
//	msg, err := outbox.NewMessage("orders", key, value, outbox.MessageOptions{})
//	_, err = writer.Commit(ctx, func(ctx context.Context, tx *outboxddb.Tx) error {
//		tx.Put(orderPut)       // the business item
//		return tx.Enqueue(msg) // the same transaction: both commit, or neither
//	})
//
// Commit places each message in its bucket (ComputeBucket at the writer's
// bucket count), reserves its sequence there, builds and sends one
// TransactWriteItems (again when it loses a race), and wakes a relay once
// it committed. Messages of one key share a bucket, so
// a key's messages keep their commit order for writers that serialize
// their commits of a key. MessageOptions sets headers, an explicit
// partition or the message's id (default NewMessageID), which every copy
// of the message carries in the x-outbox-message-id header.
//
// # Relaying
//
// A Relay drains a Store (outboxddb.Store) into a Publisher
// (outboxkafka): NewRelay with a RelayConfig, then Relay.Run once per
// invocation with a RunInput saying what started it (TriggerSchedule,
// TriggerWake, TriggerDirect) and its deadline. RunResult says how the run
// ended. On AWS Lambda, outboxlambda wires all of it from the SPILLWAY_*
// environment, and the functions/relay binary is that wiring; the
// spillway CLI's drain command runs a relay until the table is empty.
// RelayOptions hold the timings (LeaseDuration, LeaseRenewInterval,
// PollInterval, BatchSize, the poison policy); their zero values take the
// defaults the documentation of each field states.
//
// Relays of one table share its buckets through leases, without talking to
// each other, and every relay's clock must agree with every other's within
// KeepMargin (10 s with the default timings). Hooks (RelayConfig.Hooks: a
// value implementing the Hook interfaces it cares about), Tracer and Clock
// are the seams for telemetry and time; outboxobs holds the recorders.
//
// # The protocol
//
// The lease round, fair shares, the trust window, the keep margin, grants,
// quarantine and generations (changing the bucket count) are explained in
// docs/protocol.md in the repository; what keeps a key's order on every
// path, with the test that guards it, in docs/order.md. The formats every
// implementation must share (bucket hash, header codec, planner) are pinned
// by the golden vectors in testdata/.
//
// This package imports only the standard library; the DynamoDB store, the
// Kafka publisher, telemetry and test backends live in subpackages that
// import it, never the reverse.
package outbox
