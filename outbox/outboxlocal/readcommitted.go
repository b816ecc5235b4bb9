package outboxlocal

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// The answers of the ReadCommitted model, spelled as DynamoDB spells them.
const (
	typeTransactCanceledFull     = "com.amazonaws.dynamodb.v20120810#TransactionCanceledException"
	typeTransactionConflict      = "com.amazonaws.dynamodb.v20120810#TransactionConflictException"
	typeTransactionInProgress    = "com.amazonaws.dynamodb.v20120810#TransactionInProgressException"
	codeTransactionConflict      = "TransactionConflict"
	messageTransactionConflict   = "Transaction is ongoing for the item"
	messageTransactionInProgress = "Transaction with the given request token is already in progress"
)

// ReadCommitted makes the embedded server commit a TransactWriteItems as
// DynamoDB lets other requests see one that is still committing (the AWS
// developer guide, "Isolation levels for DynamoDB transactions": Query,
// Scan and BatchGetItem are read-committed against a transaction, GetItem
// and TransactGetItems serializable; "Transaction conflict handling"):
//
//   - The transaction's conditions are checked and its actions applied at
//     once, but each item it puts that did not exist before becomes
//     visible on its own, at an instant within the commit; the
//     transaction is answered once the last is visible.
//   - A Query or Scan meanwhile returns the items already visible: a
//     subset of the transaction. Select=COUNT reads the same items, so it
//     counts the same subset: a count query is a Query, and the guide
//     lists no exception for it. GetItem and BatchGetItem read an item not
//     yet visible as absent (the state before the transaction).
//   - A request that names an item of a commit in progress (any action's
//     item, visible or not) is refused as the guide says: PutItem,
//     UpdateItem and DeleteItem with TransactionConflictException,
//     TransactWriteItems and TransactGetItems with a
//     TransactionCanceledException whose reason is TransactionConflict.
//     A BatchWriteItem naming one is answered with every request
//     unprocessed (DynamoDB may leave any of them so). The same
//     ClientRequestToken while its commit is in progress is answered
//     TransactionInProgressException.
//
// Only new items are committed one at a time: the transaction's updates,
// deletes and replacements of existing items are visible at once. The
// zero value (MaxCommit and Schedule unset) commits every transaction at
// once, as the server does without the option.
type ReadCommitted struct {
	// Seed seeds the draws of the commits' schedules, handed to the
	// transactions in the order the server applies them.
	Seed uint64
	// MaxCommit bounds a commit: for each, a duration is drawn uniformly
	// from [0, MaxCommit), each of its new items becomes visible at an
	// instant drawn uniformly within it, and the commit ends with the last,
	// on the time package's clock (a bubble's in a testing/synctest test).
	MaxCommit time.Duration
	// Schedule, when set, replaces the draws: given how many new items a
	// transaction puts, it returns when each becomes visible after the
	// commit starts, in the order of the transaction's actions (missing
	// entries: at once). The transaction is answered after the last.
	Schedule func(items int) []time.Duration
}

// WithReadCommitted makes the embedded server commit transactions as rc
// says. StartDynamoDB refuses it with an external endpoint, whose
// transactions commit as they do there; DynamoDB Local applies a
// transaction under one lock, so it never shows one in part.
func WithReadCommitted(rc ReadCommitted) DynamoOption {
	return func(c *dynamoConfig) { c.readCommitted = &rc }
}

// ReadCommittedCounts is what the ReadCommitted model did.
type ReadCommittedCounts struct {
	// Commits are the transactions whose new items became visible one at a
	// time.
	Commits int
	// PartialReads are the Query and Scan answers given while a commit in
	// progress had made some of its items visible and still hid one in a
	// partition the read covered; PartialCounts are those that were
	// Select=COUNT.
	PartialReads, PartialCounts int
	// Conflicts are the requests refused because they named an item of a
	// commit in progress.
	Conflicts int
}

// ReadCommittedCounts returns what the ReadCommitted model did so far; zero
// without the option.
func (d *DynamoDB) ReadCommittedCounts() ReadCommittedCounts {
	if d.commits == nil {
		return ReadCommittedCounts{}
	}
	d.commits.mu.Lock()
	defer d.commits.mu.Unlock()
	return d.commits.counts
}

// commits is the state of the ReadCommitted model, shared by the server's
// requests; its own lock guards it, so readers under the server's shared
// lock can consult it.
type commits struct {
	cfg ReadCommitted

	mu       sync.Mutex
	rng      *rand.Rand
	inFlight []*commit
	counts   ReadCommittedCounts
}

func newCommits(rc *ReadCommitted) *commits {
	if rc == nil || (rc.MaxCommit <= 0 && rc.Schedule == nil) {
		return nil
	}
	return &commits{cfg: *rc, rng: rand.New(rand.NewPCG(rc.Seed, 0x7265616463))}
}

// commit is one transaction in progress.
type commit struct {
	token string
	// items are the identities (itemIdentity) of every action's item.
	items map[string]bool
	// hidden maps each new item not yet visible to its partition
	// (partitionIdentity).
	hidden map[string]string
	// shown: some item of the transaction is visible already.
	shown bool
}

// newPut is a new item of a transaction, to be made visible at its
// instant.
type newPut struct {
	table string
	item  map[string]json.RawMessage
	key   map[string]json.RawMessage
	id    string
	part  string
	at    time.Duration
}

func itemIdentity(table string, key map[string]json.RawMessage) string {
	return table + "\x00" + keyIdentity(key)
}

func partitionIdentity(table string, value json.RawMessage) string {
	return table + "\x00" + valueIdentity(value)
}

// schedule draws when each of n new items becomes visible and when the
// commit is answered. The caller holds the server's exclusive lock, so
// draws follow the order in which transactions are applied.
func (c *commits) schedule(n int) (at []time.Duration, end time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at = make([]time.Duration, n)
	if c.cfg.Schedule != nil {
		copy(at, c.cfg.Schedule(n))
		for _, d := range at {
			end = max(end, d)
		}
		return at, end
	}
	span := c.rng.Int64N(int64(c.cfg.MaxCommit))
	for i := range at {
		at[i] = time.Duration(c.rng.Int64N(span + 1))
		end = max(end, at[i])
	}
	return at, end
}

// conflicting reports whether an item of a commit in progress is among ids.
func (c *commits) conflicting(ids ...string) []bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []bool
	hit := false
	for _, id := range ids {
		in := slices.ContainsFunc(c.inFlight, func(t *commit) bool { return t.items[id] })
		hit = hit || in
		out = append(out, in)
	}
	if !hit {
		return nil
	}
	c.counts.Conflicts++
	return out
}

// tokenInFlight reports whether a commit sent with token is in progress.
func (c *commits) tokenInFlight(token string) bool {
	if token == "" {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.ContainsFunc(c.inFlight, func(t *commit) bool { return t.token == token }) {
		c.counts.Conflicts++
		return true
	}
	return false
}

// read counts a Query or Scan answer that met a commit in part: partition
// is the one the query covers, "" for a Scan (every partition).
func (c *commits) read(partition string, count bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.inFlight {
		if !t.shown {
			continue
		}
		for _, p := range t.hidden {
			if partition == "" || p == partition {
				c.counts.PartialReads++
				if count {
					c.counts.PartialCounts++
				}
				return
			}
		}
	}
}

func (c *commits) start(t *commit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight = append(c.inFlight, t)
	c.counts.Commits++
}

func (c *commits) shown(t *commit, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(t.hidden, id)
	t.shown = true
}

func (c *commits) done(t *commit) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.inFlight = slices.DeleteFunc(c.inFlight, func(x *commit) bool { return x == t })
}

// conflict answers a request that named an item of a commit in progress,
// as DynamoDB answers op then. The caller holds mu, shared or exclusive.
func (s *embeddedServer) conflict(op string, req *wireRequest) (wireResponse, bool) {
	if s.commits == nil {
		return wireResponse{}, false
	}
	switch op {
	case "PutItem", "UpdateItem", "DeleteItem":
		key, ok := req.Key, len(req.Key) > 0
		if op == "PutItem" {
			key, ok = s.keyOf(req.TableName, req.Item)
		}
		if ok && s.commits.conflicting(itemIdentity(req.TableName, key)) != nil {
			return apiError(http.StatusBadRequest, typeTransactionConflict, messageTransactionConflict), true
		}
	case "BatchWriteItem":
		var ids []string
		for table, writes := range req.writeRequests() {
			for _, w := range writes {
				switch {
				case w.PutRequest != nil:
					if key, ok := s.keyOf(table, w.PutRequest.Item); ok {
						ids = append(ids, itemIdentity(table, key))
					}
				case w.DeleteRequest != nil:
					ids = append(ids, itemIdentity(table, w.DeleteRequest.Key))
				}
			}
		}
		if s.commits.conflicting(ids...) != nil {
			return wireResponse{status: http.StatusOK, body: mustJSON(map[string]json.RawMessage{"UnprocessedItems": req.RequestItems})}, true
		}
	case "TransactWriteItems", "TransactGetItems":
		if op == "TransactWriteItems" && s.commits.tokenInFlight(req.ClientRequestToken) {
			return apiError(http.StatusBadRequest, typeTransactionInProgress, messageTransactionInProgress), true
		}
		ids := make([]string, len(req.TransactItems))
		for i, t := range req.TransactItems {
			if key, table, ok := s.actionKey(t); ok {
				ids[i] = itemIdentity(table, key)
			}
		}
		if hit := s.commits.conflicting(ids...); hit != nil {
			return transactionConflict(hit), true
		}
	}
	return wireResponse{}, false
}

// actionKey is the key of a transaction's action. The caller holds mu.
func (s *embeddedServer) actionKey(t wireTransactItem) (map[string]json.RawMessage, string, bool) {
	a := t.action()
	if a == nil {
		return nil, "", false
	}
	if t.Put != nil {
		key, ok := s.keyOf(a.TableName, a.Item)
		return key, a.TableName, ok
	}
	return a.Key, a.TableName, len(a.Key) > 0
}

// transactionConflict is the TransactionCanceledException of a
// transaction whose actions hit (in order) items of a commit in progress.
func transactionConflict(hit []bool) wireResponse {
	reasons := make([]map[string]string, len(hit))
	codes := make([]string, len(hit))
	for i, h := range hit {
		reasons[i], codes[i] = map[string]string{"Code": "None"}, "None"
		if h {
			reasons[i] = map[string]string{"Code": codeTransactionConflict, "Message": messageTransactionConflict}
			codes[i] = codeTransactionConflict
		}
	}
	return wireResponse{status: http.StatusBadRequest, body: mustJSON(map[string]any{
		"__type":              typeTransactCanceledFull,
		"message":             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
		"CancellationReasons": reasons,
	})}
}

// newItems returns the Puts of req whose item does not exist yet. The
// caller holds mu exclusively, so nothing writes them before the
// transaction.
func (s *embeddedServer) newItems(ctx context.Context, req *wireRequest) []newPut {
	var out []newPut
	for _, t := range req.TransactItems {
		if t.Put == nil {
			continue
		}
		key, ok := s.keyOf(t.Put.TableName, t.Put.Item)
		if !ok || s.getItem(ctx, t.Put.TableName, key) != nil {
			continue
		}
		out = append(out, newPut{
			table: t.Put.TableName, item: t.Put.Item, key: key,
			id: itemIdentity(t.Put.TableName, key), part: partitionIdentity(t.Put.TableName, s.hashValue(t.Put.TableName, key)),
		})
	}
	return out
}

// hideNew takes the new items of a transaction that just committed out of
// the server until their instants, and records the commit as in progress;
// nil when every item is visible at once. The caller holds mu
// exclusively.
func (s *embeddedServer) hideNew(ctx context.Context, req *wireRequest, puts []newPut) (*commit, []newPut, time.Duration, error) {
	at, end := s.commits.schedule(len(puts))
	t := &commit{token: req.ClientRequestToken, items: map[string]bool{}, hidden: map[string]string{}}
	var later []newPut
	for i, p := range puts {
		if at[i] <= 0 {
			continue
		}
		resp := s.call(ctx, "DeleteItem", mustJSON(map[string]any{"TableName": p.table, "Key": p.key}))
		if resp.status != http.StatusOK {
			return nil, nil, 0, fmt.Errorf("outboxlocal: read-committed commit: hold back a new item: %s", resp.body)
		}
		p.at = at[i]
		later = append(later, p)
		t.hidden[p.id] = p.part
	}
	if len(later) == 0 {
		return nil, nil, 0, nil
	}
	for _, a := range req.TransactItems {
		if key, table, ok := s.actionKey(a); ok {
			t.items[itemIdentity(table, key)] = true
		}
	}
	t.shown = len(later) < len(puts)
	s.commits.start(t)
	return t, later, end, nil
}

// reveal makes a commit's held-back items visible at their instants,
// counted from start, and ends the commit at end. The server does not
// give a commit up when its client does.
func (s *embeddedServer) reveal(ctx context.Context, t *commit, puts []newPut, start time.Time, end time.Duration) error {
	ctx = context.WithoutCancel(ctx)
	defer s.commits.done(t)
	slices.SortStableFunc(puts, func(a, b newPut) int { return int(a.at - b.at) })
	for _, p := range puts {
		time.Sleep(time.Until(start.Add(p.at)))
		s.mu.Lock()
		resp := s.call(ctx, "PutItem", mustJSON(map[string]any{"TableName": p.table, "Item": p.item}))
		s.mu.Unlock()
		if resp.status != http.StatusOK {
			return fmt.Errorf("outboxlocal: read-committed commit: make a new item visible: %s", resp.body)
		}
		s.commits.shown(t, p.id)
	}
	time.Sleep(time.Until(start.Add(end)))
	return nil
}

// readPartition is the partition a Query covers, for the counts; "" for a
// Scan. The caller holds mu.
func (s *embeddedServer) readPartition(req *wireRequest) string {
	info := s.tables[req.TableName]
	if info == nil {
		return ""
	}
	placeholder := partitionPlaceholder(req.KeyConditionExpression, req.ExpressionAttributeNames, info.hashKey)
	return partitionIdentity(req.TableName, req.ExpressionAttributeValues[placeholder])
}
