package fleetsim

import (
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

func (s msgState) String() string {
	return [...]string{"pending", "committed", "uncertain", "rejected"}[s]
}

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
	opTxn                       // Writer.TransactItems + business Put
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
	// hide injects the read-committed anomaly after the commit: the first
	// message of a bucket with several is hidden from the next query.
	hide bool
}

// keySpec is one record key: its topic, its optional pinned partition and
// the writer that owns (serializes) it.
type keySpec struct {
	name      string
	topic     string
	partition *int32
	writer    int
	next      int // next index, during generation
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
	zipf := rand.NewZipf(r, 1.15, 1, uint64(cfg.Keys-1))
	pickKey := func(writer int) *keySpec {
		for range 30 {
			k := w.keys[zipf.Uint64()]
			if writer < 0 || k.writer == writer {
				return k
			}
		}
		// A rarely drawn writer: its own keys, uniformly.
		for {
			k := w.keys[r.IntN(len(w.keys))]
			if k.writer == writer {
				return k
			}
		}
	}

	total := 0
	for total < cfg.Messages {
		op := &writerOp{seq: len(w.ops)}
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
		n = min(n, cfg.Messages-total)
		keyless := r.IntN(100) < 5
		var first *keySpec
		if !keyless {
			first = pickKey(-1)
			op.writer = first.writer
		} else {
			op.writer = r.IntN(cfg.Writers)
		}
		for i := range n {
			m := &logicalMsg{id: randomID(r), index: -1}
			var k *keySpec
			switch {
			case keyless:
				m.topic = simTopics[r.IntN(len(simTopics))]
			case i == 0:
				k = first
			default:
				k = pickKey(op.writer)
			}
			if k != nil {
				m.topic, m.key, m.keyName, m.partition = k.topic, []byte(k.name), k.name, k.partition
			}
			m.value = make([]byte, 40+r.IntN(360))
			for j := range m.value {
				m.value[j] = byte('a' + r.IntN(26))
			}
			if r.IntN(4) == 0 {
				m.headers = []outbox.Header{{Key: "op", Value: []byte(op.kind.String())}}
			}
			bucket, err := outbox.ComputeBucket(m.key, m.id, cfg.BucketCount, m.partition)
			if err != nil {
				return nil, err
			}
			m.bucket = bucket
			op.msgs = append(op.msgs, m)
			w.msgs = append(w.msgs, m)
			w.byID[m.id] = m
		}
		if op.kind == opTxn || op.kind == opTxnRejected {
			op.order = fmt.Sprintf("order-%06d", op.seq)
		}
		op.hide = cfg.Faults && len(op.msgs) > 1 && r.IntN(3) == 0
		total += n
		w.ops = append(w.ops, op)
	}

	// Times: uniform over the write window, on a 50 ms grid so that
	// operations of different writers often coincide.
	for _, op := range w.ops {
		op.at = time.Duration(r.Int64N(int64(cfg.WriteDuration/(50*time.Millisecond)))) * 50 * time.Millisecond
	}
	slices.SortStableFunc(w.ops, func(a, b *writerOp) int { return int(a.at - b.at) })
	// Indices follow execution order: a writer runs its operations in time
	// order, one at a time, and owns its keys.
	for _, op := range w.ops {
		if op.kind == opTxnRejected {
			continue
		}
		for _, m := range op.msgs {
			if m.keyName == "" {
				continue
			}
			k := w.keys[keyIndex(m.keyName)]
			m.index = k.next
			k.next++
		}
	}
	return w, nil
}

func keyIndex(name string) int {
	var i int
	_, _ = fmt.Sscanf(name, "key-%d", &i)
	return i
}

// randomID draws a version 4 message id from r.
func randomID(r *rand.Rand) outbox.MessageID {
	var id outbox.MessageID
	for i := 0; i < 16; i += 8 {
		v := r.Uint64()
		for j := range 8 {
			id[i+j] = byte(v >> (8 * j))
		}
	}
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}
