package outboxddb

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/generation"
)

// GenerationSealedError reports a write refused by its generation check:
// the generation's marker is no longer open. It matches
// generation.ErrSealed.
type GenerationSealedError struct {
	// Op is what was refused, e.g. "enqueue 1 messages (…)".
	Op string
	// Generation is the generation the write was for.
	Generation generation.Generation
	// Marker is the marker as DynamoDB returned it with the refusal; its
	// Exists is false when the response carried none.
	Marker generation.Marker
	// Switched is true when the writer replaces Generation and writes its
	// successor from now on: build the transaction's items again.
	Switched bool
}

// Error implements error.
func (e *GenerationSealedError) Error() string {
	if e.Switched {
		return fmt.Sprintf("outboxddb: %s: %v: generation %s is %s; the writer writes %s from now on, build the items again",
			e.Op, generation.ErrSealed, e.Generation, e.Marker.Phase, e.Marker.Successor)
	}
	if !e.Marker.Exists {
		return fmt.Sprintf("outboxddb: %s: %v: generation %s is no longer open", e.Op, generation.ErrSealed, e.Generation)
	}
	return fmt.Sprintf("outboxddb: %s: %v: generation %s is %s; switch the writer to key prefix %q and bucket count %d",
		e.Op, generation.ErrSealed, e.Generation, e.Marker.Phase, e.Marker.Successor.KeyPrefix, e.Marker.Successor.BucketCount)
}

// Is reports whether target is generation.ErrSealed.
func (e *GenerationSealedError) Is(target error) bool { return target == generation.ErrSealed }

// generationCheck returns a ConditionCheck on the writer's generation
// marker: it passes while there is no marker or the marker is open, and
// fails the transaction once the operator sealed the generation
// (WriterOptions.GenerationCheck). It costs two write units per transaction.
func (w *Writer) generationCheck() types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName:                           aws.String(w.opts.TableName),
		Key:                                 w.keys.generationKey(),
		ConditionExpression:                 aws.String(exprGenerationWritable),
		ExpressionAttributeNames:            names("#pk", w.opts.PartitionKey, "#state", attrGenerationState),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":open": str(string(generation.PhaseOpen))},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

func (w *Writer) generation() generation.Generation {
	return generation.Generation{KeyPrefix: w.opts.KeyPrefix, BucketCount: w.opts.BucketCount}
}

// sealed returns the error of a cancelled transaction whose generation
// check (among items, in request order) was refused, with the marker
// DynamoDB returned; nil when the check passed or is absent.
func (w *Writer) sealed(err error, items []types.TransactWriteItem, what string) *GenerationSealedError {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil
	}
	for i, r := range tce.CancellationReasons {
		if i >= len(items) || !w.isGenerationCheck(items[i]) || aws.ToString(r.Code) != "ConditionalCheckFailed" {
			continue
		}
		m, decodeErr := decodeMarker(w.keys, w.opts.KeyPrefix, r.Item)
		if decodeErr != nil {
			m = generation.Marker{}
		}
		return &GenerationSealedError{Op: what, Generation: w.generation(), Marker: m}
	}
	return nil
}

func (w *Writer) isGenerationCheck(item types.TransactWriteItem) bool {
	if item.ConditionCheck == nil || aws.ToString(item.ConditionCheck.TableName) != w.opts.TableName {
		return false
	}
	pk, _ := stringAttr(item.ConditionCheck.Key, w.opts.PartitionKey)
	return pk == w.keys.generationPartition()
}

// target is the writer of the generation w writes now: the previous one
// until w saw it sealed.
func (w *Writer) target() *Writer {
	if w.prev != nil && !w.switched.Load() {
		return w.prev
	}
	return w
}

// learn decides, from the marker of a refused check on the previous
// generation, what a switching writer writes next (generation.WriteTarget): on
// a seal naming this generation it switches for good and marks the error
// Switched; a marker naming another successor is a misconfiguration.
func (w *Writer) learn(se *GenerationSealedError) error {
	if !se.Marker.Exists {
		return se
	}
	next, err := generation.WriteTarget(se.Marker, w.prev.generation(), w.generation())
	if err != nil {
		return fmt.Errorf("%s: %w", se.Op, err)
	}
	if next == w.generation() {
		w.switched.Store(true)
		se.Switched = true
	}
	return se
}

// enqueueSwitching is EnqueueBatch of a writer with a previous generation:
// to the previous generation with its check while it is open, else to this
// one; a refusal for the seal switches the writer and sends the messages
// again, to this generation, once.
func (w *Writer) enqueueSwitching(ctx context.Context, msgs []outbox.Message) ([]outbox.Message, error) {
	for {
		t := w.target()
		if t == w {
			if len(msgs) == 1 {
				m, err := w.enqueue(ctx, msgs[0])
				return []outbox.Message{m}, err
			}
			return w.enqueueBatch(ctx, msgs)
		}
		out, err := t.enqueueBatch(ctx, msgs)
		var se *GenerationSealedError
		if !errors.As(err, &se) {
			return out, err
		}
		if !se.Marker.Exists {
			// The refusal carried no marker: read it.
			item, readErr := readGenerationItem(ctx, t.client, t.opts.Options, t.tel, t.keys, generationSortKey)
			if readErr != nil {
				return nil, errors.Join(err, readErr)
			}
			if se.Marker, readErr = decodeMarker(t.keys, t.opts.KeyPrefix, item); readErr != nil {
				return nil, errors.Join(err, readErr)
			}
		}
		if err := w.learn(se); !se.Switched {
			return nil, err
		}
	}
}
