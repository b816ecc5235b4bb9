// Package outboxtest provides the backends Spillway's tests and its local
// mode (`spillway run`) run against: an in-process DynamoDB (the minidyn
// server behind a compensating HTTP handler) or an external endpoint, an
// in-process Kafka cluster (kfake) or external brokers, SDK middleware that
// counts requests, refused writes and capacity units and injects faults,
// and a manual clock.
//
// Every constructor has a form without *testing.T for the local mode
// (StartDynamoDB, StartKafka, each with Close) and a test form that fails
// the test and registers the cleanup (NewDynamoDB, NewKafka). The clients
// are the real aws-sdk-go-v2 and franz-go clients; the embedded servers
// speak the real wire protocols.
//
// README.md in this directory lists every gap measured between the
// embedded DynamoDB server and DynamoDB, how the helpers compensate it, the
// capacity-unit rules of the Counter, which faults work where, and how to
// run the same tests against external endpoints.
package outboxtest
