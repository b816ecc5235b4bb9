package outboxddb

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/generation"
)

// Attributes of the predecessor marker.
const (
	attrPredecessorPrefix  = "PredecessorPrefix"
	attrPredecessorBuckets = "PredecessorBucketCount"
)

const (
	// predecessorSortKey is the predecessor marker's sort key in the new
	// generation's {P}#GENERATION partition, beside the generation's own
	// marker (GENERATION) once it is retired in its turn.
	predecessorSortKey = "PREDECESSOR"
	// exprPredecessorFits accepts a predecessor marker that does not exist
	// yet or already names the same predecessor.
	exprPredecessorFits = "attribute_not_exists(#pk) OR (#pp = :pp AND #pc = :pc)"
)

var _ outbox.GenerationGate = (*Store)(nil)

// predecessorPut is the put of successor's predecessor marker naming this
// generation, part of OpenGeneration's transaction.
func (s *Store) predecessorPut(successor generation.Generation, now int64) *types.Put {
	k := s.keysOf(successor.KeyPrefix)
	item := k.key(k.generationPartition(), predecessorSortKey)
	item[attrPredecessorPrefix] = str(s.opts.KeyPrefix)
	item[attrPredecessorBuckets] = num(int64(s.opts.BucketCount))
	item[attrOpenedAt] = num(now)
	return &types.Put{
		TableName:                           aws.String(s.opts.TableName),
		Item:                                item,
		ConditionExpression:                 aws.String(exprPredecessorFits),
		ExpressionAttributeNames:            names("#pk", s.opts.PartitionKey, "#pp", attrPredecessorPrefix, "#pc", attrPredecessorBuckets),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":pp": str(s.opts.KeyPrefix), ":pc": num(int64(s.opts.BucketCount))},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// ReadPredecessor reads the store's predecessor marker: the generation its
// own one replaces, if any (one strongly consistent query, one read unit).
func (s *Store) ReadPredecessor(ctx context.Context) (generation.PredecessorMarker, error) {
	item, err := s.readGenerationItem(ctx, s.keys, predecessorSortKey)
	if err != nil || item == nil {
		return generation.PredecessorMarker{}, err
	}
	prefix, okPrefix := stringAttr(item, attrPredecessorPrefix)
	count, okCount := intAttr(item, attrPredecessorBuckets)
	if !okPrefix || !okCount {
		return generation.PredecessorMarker{}, fmt.Errorf("outboxddb: predecessor marker of %s: %w: it needs %s and %s", s.Generation(),
			outbox.ErrInvalidItem, attrPredecessorPrefix, attrPredecessorBuckets)
	}
	return generation.PredecessorMarker{Exists: true, Predecessor: generation.Generation{KeyPrefix: prefix, BucketCount: int(count)}}, nil
}

// CheckServable is the gate of a relay configured with this store's
// generation alone (outbox.RelayConfig.Gate): it reads the predecessor
// marker (one read unit) and, when there is one, the predecessor's own
// marker (one more), and decides with generation.CheckServable. A store that
// found its predecessor drained remembers it and reads nothing again:
// drained is the last phase, so that answer cannot go stale. "No
// predecessor" is not remembered, since a change naming this generation as
// the successor may open later; each run that joins pays the one read.
func (s *Store) CheckServable(ctx context.Context) error {
	if s.predecessorDrained.Load() {
		return nil
	}
	p, err := s.ReadPredecessor(ctx)
	if err != nil || !p.Exists {
		return err
	}
	m, err := s.readMarker(ctx, p.Predecessor)
	if err != nil {
		return err
	}
	if err := generation.CheckServable(p, m, s.Generation()); err != nil {
		return err
	}
	s.predecessorDrained.Store(true)
	return nil
}
