// Package lease is Spillway's lease protocol: the acquisition round and the
// renewal, its planner and fair shares, the trust and claim-window rules,
// the relay's book of what it holds (Book), and the tick timestamps the
// table stores. It imports only the standard library and nothing of
// Spillway, and the seam points one way: the relay engine (package outbox)
// runs the protocol over its store's primitives (IO), and a store (outboxddb,
// outboxmem) only sends the requests it is given, never calling into the
// protocol or back into the engine.
//
// Time is always an input: every decision takes a now, so every rule is a
// pure function table-tested with literal times, and the planner's golden
// vectors (testdata/planner-vectors.json) pin it across languages.
//
// The protocol itself — rounds, fair share, keeps and the keep margin
// (KeepMargin), the trust window, claims and pruning — is explained once,
// in docs/protocol.md in the repository; each rule's constant or function
// here names it.
package lease
