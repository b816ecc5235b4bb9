// Package generation changes an outbox table's bucket count without
// breaking per-key order. A generation is one key prefix with one bucket
// count; a new count starts a new generation on the same table and retires
// the old one through three phases, open → sealed → drained, each moved by
// one conditional write on the old generation's marker.
//
// Writers use WriteTarget to pick the generation they write; relays serving
// both generations run Relay, which follows Plan; a relay configured with
// the new generation alone is stopped by CheckServable (through
// outbox.GenerationGate) until the old one is drained. outboxddb.Store is
// the DynamoDB Store. The protocol is specified once, in docs/protocol.md
// ("Generations: changing the bucket count"); the operator's steps are in docs/operations.md.
//
// The package imports only the standard library and the core.
package generation
