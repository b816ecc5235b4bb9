// Package outboxddb keeps the Spillway outbox in one Amazon DynamoDB table:
// the Writer enqueues messages (inside the caller's TransactWriteItems or on
// their own; WriterFromEnv builds one, with its wake-ups, from the stack's
// SPILLWAY_* variables), the Store implements outbox.Store for relays, and
// CreateTableInput / CreateIfNotExists provision the table.
//
// # Table layout
//
// Every item lives under Options.KeyPrefix ({P}, default OUTBOX), in a table
// with a string partition key and a string sort key (PK and SK by default):
//
//	Message           {P}#MESSAGES#{bucket}   19-digit sequence, e.g. 0000000000000000042
//	Sequence counter  {P}#SEQUENCE#{bucket}   SEQUENCE
//	Lease             {P}#COORDINATION        LEASE#{bucket, 10 digits}
//	Relay heartbeat   {P}#COORDINATION        RELAY#{relay id}
//	Layout record     {P}#COORDINATION        LAYOUT
//
// The layout record states the prefix's bucket count (ReadLayout,
// RecordLayout): writers check it once (Writer.CheckLayout), relays in
// every full lease round's read, and both refuse another count with a
// *LayoutError. Relays of other languages read the coordination partition
// but take only LEASE# and RELAY# sort keys, so they skip it.
//
// Two partition families are Spillway's own, invisible to writers and
// relays of other languages, which read only the three above: parked
// messages ({P}#PARKED#{bucket}, under PoisonQuarantine) and the generation
// markers ({P}#GENERATION): sort key GENERATION retires a key prefix and
// bucket count while the bucket count changes (Store.OpenGeneration,
// SealGeneration, FinishGeneration), sort key PREDECESSOR names the
// generation a new one replaces (Store.CheckServable). Writers switch at
// the seal with WriterOptions.PreviousKeyPrefix, or are refused after it with
// WriterOptions.GenerationCheck.
//
// Timestamps are .NET UTC ticks. The layout, the attribute names and the
// condition expressions are a contract shared with writers and relays in
// other languages; this package reproduces them exactly.
//
// # Ordering
//
// A writer takes each message's sequence number from its bucket's atomic
// counter before the transaction commits, so the order of two messages in a
// bucket is the order of their reservations. A reservation that never
// commits leaves a gap. Queries are only read-committed against
// transactions, so each message carries its transaction's block of numbers
// in the bucket (TxFirst, TxCount, which relays of other languages ignore),
// and a fetch hands out a block whole or not yet; rows without the stamp
// have the gaps below them probed (Store.FetchBatch, docs/protocol.md).
//
// # Leases
//
// The lease protocol is package lease's (lease.AcquireRound, lease.Renew,
// explained in docs/protocol.md), which the relay runs over the store's
// primitives (lease.IO: Heartbeat, Snapshot, Heartbeats, WriteLeases,
// Prune); the store only sends what the protocol plans. Each acquisition round writes a heartbeat, reads every lease and
// heartbeat with one strongly consistent query, and writes only the
// relay's own part of the shared plan: relays that read the same state
// write disjoint leases, so a healthy fleet makes no refused conditional
// write. Every lease write is conditional; the plan orders writes,
// DynamoDB decides ownership. A relay whose rounds leave leases unrenewed
// adds a KeepsAhead attribute (BOOL) to its heartbeat, which relays of
// other languages ignore; their records, without it, make Spillway's
// rounds keep every lease (lease.RelayState.KeepsAhead).
//
// A woken relay's trust check writes nothing. On a
// large table it first reads only the hinted buckets' lease items and the
// heartbeats (Store.ReadCoverage), and reads the whole partition only when
// a hinted bucket is not held by a live peer. A bucket it left to a
// claiming peer is read again, its lease item alone (Store.ReadLeases).
package outboxddb
