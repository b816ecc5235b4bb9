// Package outboxlocal provides the backends Spillway's tests and its local
// mode (`spillway run`) run against: an in-process DynamoDB (the minidyn
// server behind a compensating HTTP handler) or an external endpoint, an
// in-process Kafka cluster (kfake) or external brokers, SDK middleware that
// counts requests, refused writes and capacity units and injects faults,
// and an OTLP/HTTP trace receiver. Each backend has an in-memory form
// (InMemory, KafkaConfig.InMemory) that a testing/synctest bubble can run.
//
// The package does not import testing, so the operator CLI can link it
// without test code; the test forms of the constructors (NewDynamoDB,
// NewKafka, CreateTable, Consume), which fail the test and register the
// cleanup, are in outboxtest. The clients are the real aws-sdk-go-v2 and
// franz-go clients; the embedded servers speak the real wire protocols.
// The function binaries never link this package (TestDependencies/BinaryDependencies in
// internal/repocheck checks it).
//
// README.md in this directory lists every gap measured between the
// embedded DynamoDB server and DynamoDB, how the helpers compensate it, the
// capacity-unit rules of the Counter, which faults work where, and how to
// run the same tests against external endpoints.
package outboxlocal
