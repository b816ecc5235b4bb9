package outboxddb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/generation"
)

// Attributes of the generation marker besides BucketCount (the
// generation's own count).
const (
	attrGenerationState  = "GenerationState"
	attrSuccessorPrefix  = "SuccessorPrefix"
	attrSuccessorBuckets = "SuccessorBucketCount"
	attrOpenedAt         = "OpenedAtUtc"
	attrSealedAt         = "SealedAtUtc"
	attrDrainedAt        = "DrainedAtUtc"
)

// Operation names of the generation requests, for telemetry.
const (
	OpGenerationRead     = "generation_read"
	OpGenerationOpen     = "generation_open"
	OpGenerationSeal     = "generation_seal"
	OpGenerationFinish   = "generation_finish"
	OpGenerationContents = "generation_contents"
)

const (
	generationSortKey = "GENERATION"
	// exprGenerationWritable is the writers' check: no marker (nobody
	// started to retire the generation) or an open one.
	exprGenerationWritable = "attribute_not_exists(#pk) OR #state = :open"
	exprGenerationMove     = "#state = :from AND #count = :count AND #succ = :succ AND #succCount = :succCount"
	exprGenerationSet      = "SET #state = :to, #at = :now"
	// exprItemKey reads one item by its key.
	exprItemKey = "#pk = :pk AND #sk = :sk"
)

// generationPartition is {P}#GENERATION, the marker's own partition. Relays
// and writers of other languages read only the MESSAGES, SEQUENCE and
// COORDINATION partitions, so they never see it.
func (k keys) generationPartition() string { return k.prefix + "#GENERATION" }

func (k keys) generationKey() map[string]types.AttributeValue {
	return k.key(k.generationPartition(), generationSortKey)
}

var _ generation.Store = (*Store)(nil)

// Generation returns the generation the store serves: its key prefix and
// bucket count.
func (s *Store) Generation() generation.Generation {
	return generation.Generation{KeyPrefix: s.opts.KeyPrefix, BucketCount: s.opts.BucketCount}
}

// ReadGeneration reads the store's generation marker with one strongly
// consistent query (one read unit).
func (s *Store) ReadGeneration(ctx context.Context) (generation.Marker, error) {
	return s.readMarker(ctx, s.Generation())
}

// readMarker reads the marker of generation g (this store's or another one
// of the same table) with one strongly consistent query for its key.
func (s *Store) readMarker(ctx context.Context, g generation.Generation) (generation.Marker, error) {
	k := s.keysOf(g.KeyPrefix)
	item, err := s.readGenerationItem(ctx, k, generationSortKey)
	if err != nil || item == nil {
		return generation.Marker{Generation: g}, err
	}
	return decodeMarker(k, g.KeyPrefix, item)
}

// readGenerationItem reads one item of a {P}#GENERATION partition by its
// sort key, strongly consistent (one read unit); nil when absent.
func (s *Store) readGenerationItem(ctx context.Context, k keys, sk string) (map[string]types.AttributeValue, error) {
	return readGenerationItem(ctx, s.client, s.opts.Options, s.tel, k, sk)
}

func readGenerationItem(ctx context.Context, client Client, opts Options, tel telemetry, k keys, sk string) (map[string]types.AttributeValue, error) {
	return readItem(ctx, client, opts, tel, OpGenerationRead, k.generationPartition(), sk)
}

// keysOf returns the keys of the generation under prefix in this table.
func (s *Store) keysOf(prefix string) keys {
	k := s.keys
	k.prefix = prefix
	return k
}

func (s *Store) decodeMarker(item map[string]types.AttributeValue) (generation.Marker, error) {
	return decodeMarker(s.keys, s.opts.KeyPrefix, item)
}

func decodeMarker(k keys, prefix string, item map[string]types.AttributeValue) (generation.Marker, error) {
	state, _ := stringAttr(item, attrGenerationState)
	count, okCount := intAttr(item, attrBucketCount)
	succ, okSucc := stringAttr(item, attrSuccessorPrefix)
	succCount, okSuccCount := intAttr(item, attrSuccessorBuckets)
	if !okCount || !okSucc || !okSuccCount {
		return generation.Marker{}, fmt.Errorf("outboxddb: generation marker %q: %w: it needs %s, %s and %s", k.generationPartition(),
			outbox.ErrInvalidItem, attrBucketCount, attrSuccessorPrefix, attrSuccessorBuckets)
	}
	return generation.Marker{
		Exists:     true,
		Phase:      generation.Phase(state),
		Generation: generation.Generation{KeyPrefix: prefix, BucketCount: int(count)},
		Successor:  generation.Generation{KeyPrefix: succ, BucketCount: int(succCount)},
		OpenedAt:   timeOfTicks(item, attrOpenedAt),
		SealedAt:   timeOfTicks(item, attrSealedAt),
		DrainedAt:  timeOfTicks(item, attrDrainedAt),
	}, nil
}

// OpenGeneration writes the marker — open, this generation's bucket count,
// the successor — the successor's predecessor marker naming this
// generation and the successor's layout record (RecordLayout), in one
// TransactWriteItems (two puts and an update, six write units): the
// marker conditioned on no marker existing, the predecessor marker on none
// naming another generation, the layout record on none stating another
// count. It returns the marker as stored (the existing
// one when the marker's put is refused: another relay opened it first,
// perhaps naming another successor, which generation.Plan then
// reports). A successor that already names another predecessor is a
// misconfiguration, and one whose layout record states another bucket
// count a *LayoutError.
func (s *Store) OpenGeneration(ctx context.Context, successor generation.Generation) (generation.Marker, error) {
	if err := s.checkSuccessor("open generation", successor); err != nil {
		return generation.Marker{}, err
	}
	now := s.now()
	item := s.keys.generationKey()
	item[attrGenerationState] = str(string(generation.PhaseOpen))
	item[attrBucketCount] = num(int64(s.opts.BucketCount))
	item[attrSuccessorPrefix] = str(successor.KeyPrefix)
	item[attrSuccessorBuckets] = num(int64(successor.BucketCount))
	item[attrOpenedAt] = num(now)
	_, err := s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{
				TableName:                aws.String(s.opts.TableName),
				Item:                     item,
				ConditionExpression:      aws.String(exprMessageIsNew),
				ExpressionAttributeNames: names("#pk", s.opts.PartitionKey),
			}},
			{Put: s.predecessorPut(successor, now)},
			{Update: s.successorLayout(successor, now)},
		},
		ClientRequestToken: aws.String(newRequestToken()),
	})
	if err == nil {
		return s.decodeMarker(item)
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		s.tel.failed("", OpGenerationOpen, noBucket, err)
		return generation.Marker{}, fmt.Errorf("outboxddb: open generation %s for successor %s: %w", s.Generation(), successor, err)
	}
	s.tel.refused("", OpGenerationOpen, noBucket)
	if r := tce.CancellationReasons; len(r) == 3 && aws.ToString(r[2].Code) == "ConditionalCheckFailed" {
		k := s.keysOf(successor.KeyPrefix)
		l, err := k.decodeLayout(r[2].Item)
		if err != nil {
			return generation.Marker{}, err
		}
		return generation.Marker{}, l.Check(s.opts.TableName, "relay opening generation "+successor.String(), successor.BucketCount)
	}
	if r := tce.CancellationReasons; len(r) == 3 && aws.ToString(r[1].Code) == "ConditionalCheckFailed" {
		prefix, _ := stringAttr(r[1].Item, attrPredecessorPrefix)
		count, _ := intAttr(r[1].Item, attrPredecessorBuckets)
		return generation.Marker{}, outbox.Misconfigured("open generation", "generation %s already replaces %s/%d; it cannot also replace %s",
			successor, prefix, count, s.Generation())
	}
	return s.ReadGeneration(ctx)
}

// SealGeneration moves the marker open → sealed with one conditional
// UpdateItem (the condition names the phase, this bucket count and the
// successor). Writers that check the marker are refused from then on.
func (s *Store) SealGeneration(ctx context.Context, successor generation.Generation) (generation.Marker, error) {
	return s.moveGeneration(ctx, OpGenerationSeal, generation.PhaseOpen, generation.PhaseSealed, attrSealedAt, successor)
}

// FinishGeneration moves the marker sealed → drained with one conditional
// UpdateItem. It does not look into the generation: the caller checks
// GenerationContents first.
func (s *Store) FinishGeneration(ctx context.Context, successor generation.Generation) (generation.Marker, error) {
	return s.moveGeneration(ctx, OpGenerationFinish, generation.PhaseSealed, generation.PhaseDrained, attrDrainedAt, successor)
}

// moveGeneration sends one phase change. A refused change re-reads the
// marker: already in the wanted phase for the same successor is success
// (a concurrent relay or operator did it); anything else is explained.
func (s *Store) moveGeneration(ctx context.Context, op string, from, to generation.Phase, at string, successor generation.Generation) (generation.Marker, error) {
	if err := generation.CheckTransition(from, to); err != nil {
		return generation.Marker{}, err
	}
	if err := s.checkSuccessor(op, successor); err != nil {
		return generation.Marker{}, err
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.opts.TableName),
		Key:                 s.keys.generationKey(),
		UpdateExpression:    aws.String(exprGenerationSet),
		ConditionExpression: aws.String(exprGenerationMove),
		ExpressionAttributeNames: names("#state", attrGenerationState, "#at", at, "#count", attrBucketCount,
			"#succ", attrSuccessorPrefix, "#succCount", attrSuccessorBuckets),
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":from": str(string(from)), ":to": str(string(to)), ":now": num(s.now()),
			":count": num(int64(s.opts.BucketCount)), ":succ": str(successor.KeyPrefix), ":succCount": num(int64(successor.BucketCount)),
		},
	})
	if err != nil && !isConditionFailed(err) {
		s.tel.failed("", op, noBucket, err)
		return generation.Marker{}, fmt.Errorf("outboxddb: %s %s: %w", op, s.Generation(), err)
	}
	if err != nil {
		s.tel.refused("", op, noBucket)
	}
	m, readErr := s.ReadGeneration(ctx)
	if readErr != nil {
		return generation.Marker{}, readErr
	}
	return m, s.explainMove(op, from, to, successor, m)
}

// explainMove checks the marker read after a phase change: it must be in
// phase to, for this generation and successor.
func (s *Store) explainMove(op string, from, to generation.Phase, successor generation.Generation, m generation.Marker) error {
	switch {
	case !m.Exists:
		return fmt.Errorf("outboxddb: %s %s: %w: there is no generation marker under %q; relays configured with this generation as the previous one write it on their first run",
			op, s.Generation(), generation.ErrPhase, s.keys.generationPartition())
	case m.Generation != s.Generation():
		return fmt.Errorf("outboxddb: %s %s: %w: the marker says the generation has %d buckets", op, s.Generation(), generation.ErrPhase, m.Generation.BucketCount)
	case m.Successor != successor:
		return fmt.Errorf("outboxddb: %s %s: %w: the marker names successor %s, not %s", op, s.Generation(), generation.ErrPhase, m.Successor, successor)
	case m.Phase != to:
		return fmt.Errorf("outboxddb: %s %s: %w: the marker is %s, and only a %s generation can become %s", op, s.Generation(), generation.ErrPhase, m.Phase, from, to)
	}
	return nil
}

func (s *Store) checkSuccessor(op string, successor generation.Generation) error {
	if err := successor.Validate(op); err != nil {
		return err
	}
	if successor.KeyPrefix == s.opts.KeyPrefix {
		return outbox.Misconfigured(op, "the successor of generation %s uses the same key prefix; a new bucket count needs a new key prefix", s.Generation())
	}
	return nil
}

// GenerationContents looks at the head of every bucket's parked partition,
// then of every message partition, and — when both were empty — of every
// parked partition again: strongly consistent, one-key queries (one read
// unit each), up to MaxConcurrency at once, so 3 × BucketCount for an empty
// generation. A message moves between the two partitions while the looks
// run (a relay parks it, an operator replays it), and a move between two
// looks would hide it from both; parked, messages, parked catches any one
// move whichever its direction.
func (s *Store) GenerationContents(ctx context.Context) (generation.Contents, error) {
	c := generation.Contents{Checked: true}
	var err error
	if c.Parked, err = s.nonEmpty(ctx, s.keys.parkedPartition); err != nil {
		return generation.Contents{}, err
	}
	if c.Messages, err = s.nonEmpty(ctx, s.keys.messagePartition); err != nil {
		return generation.Contents{}, err
	}
	if len(c.Parked) == 0 && len(c.Messages) == 0 {
		if c.Parked, err = s.nonEmpty(ctx, s.keys.parkedPartition); err != nil {
			return generation.Contents{}, err
		}
	}
	return c, nil
}

// nonEmpty returns, ascending, the buckets whose partition (pk of the
// bucket) holds at least one item, read strongly consistent.
func (s *Store) nonEmpty(ctx context.Context, pk func(int) string) ([]int, error) {
	found := make([]bool, s.opts.BucketCount)
	err := forEach(ctx, s.opts.MaxConcurrency, len(found), func(ctx context.Context, b int) error {
		in := s.headQuery(b, s.opts.SortKey)
		in.ExpressionAttributeValues[":pk"] = str(pk(b))
		in.ConsistentRead = aws.Bool(true)
		out, err := s.client.Query(ctx, in)
		if err != nil {
			s.tel.failed("", OpGenerationContents, b, err)
			return fmt.Errorf("outboxddb: look into %s: %w", pk(b), err)
		}
		found[b] = len(out.Items) > 0
		return nil
	})
	if err != nil {
		return nil, err
	}
	var out []int
	for b, f := range found {
		if f {
			out = append(out, b)
		}
	}
	return out, nil
}
