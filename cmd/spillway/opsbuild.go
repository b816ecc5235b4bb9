//go:build spillway.ops

package main

import (
	"context"
	"io"
)

// The operator build (-tags spillway.ops, `make cli`) leaves out what only
// runs on this machine: the embedded DynamoDB server and Kafka cluster, the
// Lambda emulator and the simulations behind run and bench. What it does
// link is what talks to a real table and real brokers.

const opsBuild = true

func runRun(context.Context, []string, io.Writer, io.Writer) error { return withoutLocal("run") }

func runBench(context.Context, []string, io.Writer, io.Writer) error { return withoutLocal("bench") }

func withoutLocal(command string) error {
	return usagef("this spillway is the operator build (-tags spillway.ops), without the embedded backends %s needs; "+
		"use a default build: go run ./cmd/spillway %s", command, command)
}
