// Package outbox is the core of Spillway, a transactional outbox that moves
// messages from an Amazon DynamoDB table to Apache Kafka.
//
// The package holds everything that must be identical across writers and
// relays in any language — the message model, the bucket hash, the header
// codec, tick timestamps, the fair-share lease planner — and the relay engine
// that drives the Store and Publisher interfaces. It imports only the standard
// library; the DynamoDB store, the Kafka publisher, telemetry and test
// backends live in subpackages that import this one, never the reverse.
//
// Time is always an input: every lease decision takes a now, and every
// service holds a Clock, so tests run on a manual clock.
package outbox
