package fleetsim

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/spillway-dev/spillway/outbox"
)

// msgState is what the writers know about a logical message.
type msgState int

const (
	// msgPending: not attempted yet.
	msgPending msgState = iota
	// msgCommitted: an enqueue of it returned success.
	msgCommitted
	// msgUncertain: every attempt failed, at least one ambiguously; a copy
	// may be stored, so a delivery is allowed but not required.
	msgUncertain
	// msgRejected: its business transaction was cancelled by the business
	// condition; it must never be delivered.
	msgRejected
)

// logicalMsg is one message of the workload. A writer that retries after a
// failure stores it again under the same id (the seed's at-least-once
// contract), so one logical message may have several stored copies.
type logicalMsg struct {
	id        outbox.MessageID
	topic     string
	key       []byte // nil: keyless
	keyName   string // "" for keyless
	index     int    // place in its key's enqueue order; -1 keyless or rejected
	partition *int32
	value     []byte
	headers   []outbox.Header
	bucket    int

	// Written by the message's writer goroutine, read after the writers
	// stopped.
	state  msgState
	copies []int64 // sequence numbers of copies known to be stored
}

type opKind int

const (
	opSingle      opKind = iota // Writer.Enqueue
	opList                      // Writer.EnqueueBatch
	opTxn                       // Writer.Prepare + business Put
	opTxnRejected               // as opTxn; the business condition cancels it
)

func (k opKind) String() string {
	return [...]string{"enqueue", "enqueue-batch", "transaction", "rejected-txn"}[k]
}

// writerOp is one operation of one writer at a simulated offset.
type writerOp struct {
	seq    int
	at     time.Duration
	writer int
	kind   opKind
	msgs   []*logicalMsg
	order  string // business item id of a transaction
}

// keySpec is one record key: its topic, its optional pinned partition and
// the writer that owns (serializes) it.
type keySpec struct {
	name      string
	topic     string
	partition *int32
	writer    int
}

// workload is the seed's writer traffic.
type workload struct {
	ops  []*writerOp // ascending by at
	msgs []*logicalMsg
	byID map[outbox.MessageID]*logicalMsg
	keys []*keySpec
}

// Topics of the simulation.
var simTopics = []string{"orders", "payments"}

// genWorkload draws the writer operations of cfg from the seed.
func genWorkload(cfg Config, partitions int32) (*workload, error) {
	r := newRand(cfg.Seed, "workload")
	w := &workload{byID: map[outbox.MessageID]*logicalMsg{}}
	for i := range cfg.Keys {
		k := &keySpec{name: fmt.Sprintf("key-%03d", i), topic: simTopics[i%len(simTopics)], writer: i % cfg.Writers}
		if i%10 == 7 {
			p := int32(i) % partitions
			k.partition = &p
		}
		w.keys = append(w.keys, k)
	}
	g := &workloadGen{cfg: cfg, r: r, w: w, zipf: rand.NewZipf(r, 1.15, 1, uint64(cfg.Keys-1))}
	for len(w.msgs) < cfg.Messages {
		op, err := g.op()
		if err != nil {
			return nil, err
		}
		w.ops = append(w.ops, op)
	}

	// Times: uniform over the write window, on a 50 ms grid so that
	// operations of different writers often coincide.
	for _, op := range w.ops {
		op.at = time.Duration(r.Int64N(int64(cfg.WriteDuration/(50*time.Millisecond)))) * 50 * time.Millisecond
	}
	slices.SortStableFunc(w.ops, func(a, b *writerOp) int { return int(a.at - b.at) })
	// Each key's messages in execution order: a writer runs its operations
	// in time order, one at a time, and owns its keys.
	next := map[string]int{}
	for _, op := range w.ops {
		for _, m := range op.msgs {
			if op.kind != opTxnRejected && m.keyName != "" {
				m.index = next[m.keyName]
				next[m.keyName]++
			}
		}
	}
	return w, nil
}

// workloadGen draws the operations of a workload, in the seed's order.
type workloadGen struct {
	cfg  Config
	r    *rand.Rand
	w    *workload
	zipf *rand.Zipf
}

// pickKey draws a key of writer (any writer when negative), skewed.
func (g *workloadGen) pickKey(writer int) *keySpec {
	for range 30 {
		k := g.w.keys[g.zipf.Uint64()]
		if writer < 0 || k.writer == writer {
			return k
		}
	}
	// A rarely drawn writer: its own keys, uniformly.
	for {
		k := g.w.keys[g.r.IntN(len(g.w.keys))]
		if k.writer == writer {
			return k
		}
	}
}

// op draws the next operation.
func (g *workloadGen) op() (*writerOp, error) {
	r, cfg := g.r, g.cfg
	op := &writerOp{seq: len(g.w.ops)}
	n := 1
	switch x := r.IntN(100); {
	case x < 55:
		op.kind = opSingle
	case x < 75:
		op.kind, n = opList, 2+r.IntN(7)
	case x < 95:
		op.kind, n = opTxn, 1+r.IntN(4)
	default:
		op.kind, n = opTxnRejected, 1+r.IntN(3)
	}
	n = min(n, cfg.Messages-len(g.w.msgs))
	keyless := r.IntN(100) < 5
	var first *keySpec
	if !keyless {
		first = g.pickKey(-1)
		op.writer = first.writer
	} else {
		op.writer = r.IntN(cfg.Writers)
	}
	for i := range n {
		m := &logicalMsg{id: randomID(r), index: -1}
		var k *keySpec
		switch {
		case keyless:
		case i == 0:
			k = first
		default:
			k = g.pickKey(op.writer)
		}
		if err := g.fill(op, m, k); err != nil {
			return nil, err
		}
		op.msgs = append(op.msgs, m)
	}
	if op.kind == opTxn || op.kind == opTxnRejected {
		op.order = fmt.Sprintf("order-%06d", op.seq)
	}
	return op, nil
}

// fill draws the rest of message m of op under key k (keyless when nil)
// and adds it to the workload.
func (g *workloadGen) fill(op *writerOp, m *logicalMsg, k *keySpec) error {
	r := g.r
	if k == nil {
		m.topic = simTopics[r.IntN(len(simTopics))]
	} else {
		m.topic, m.key, m.keyName, m.partition = k.topic, []byte(k.name), k.name, k.partition
	}
	m.value = make([]byte, 40+r.IntN(360))
	for j := range m.value {
		m.value[j] = byte('a' + r.IntN(26))
	}
	if r.IntN(4) == 0 {
		m.headers = []outbox.Header{{Key: "op", Value: []byte(op.kind.String())}}
	}
	bucket, err := outbox.ComputeBucket(m.key, m.id, g.cfg.BucketCount, m.partition)
	if err != nil {
		return err
	}
	m.bucket = bucket
	g.w.msgs = append(g.w.msgs, m)
	g.w.byID[m.id] = m
	return nil
}

// randomID draws a version 4 message id from r.
func randomID(r *rand.Rand) outbox.MessageID {
	var id outbox.MessageID
	binary.LittleEndian.PutUint64(id[:8], r.Uint64())
	binary.LittleEndian.PutUint64(id[8:], r.Uint64())
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}
