// Package lease is Spillway's lease protocol: the acquisition round, its
// planner and fair shares, the trust and claim-window rules, and the tick
// timestamps the table stores. It imports only the standard library and
// nothing of Spillway, so the seam points one way: the relay engine
// (package outbox) and every store (outboxddb, outboxmem) call into it,
// and a store never calls back into the engine.
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
