package outboxddb

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
)

// GenerationCheck returns a ConditionCheck on the writer's generation
// marker: it passes while there is no marker or the marker is open, and
// fails the transaction once the operator sealed the generation. Include it
// once in a TransactWriteItems built from TransactItems while the bucket
// count changes (Options.GenerationCheck makes Enqueue and EnqueueBatch
// include it themselves); ExplainTransactionError turns its refusal into an
// error matching outbox.ErrGenerationSealed. It costs two write units per
// transaction.
func (w *Writer) GenerationCheck() types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName:                           aws.String(w.opts.TableName),
		Key:                                 w.keys.generationKey(),
		ConditionExpression:                 aws.String(exprGenerationWritable),
		ExpressionAttributeNames:            names("#pk", w.opts.PartitionKey, "#state", attrGenerationState),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":open": str(string(outbox.PhaseOpen))},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// sealed returns the error of a cancelled transaction whose generation
// check (among items, in request order) was refused, naming the phase and
// the successor the marker holds; nil when the check passed or is absent.
func (w *Writer) sealed(err error, items []types.TransactWriteItem, what string) error {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil
	}
	for i, r := range tce.CancellationReasons {
		if i >= len(items) || !w.isGenerationCheck(items[i]) || aws.ToString(r.Code) != "ConditionalCheckFailed" {
			continue
		}
		phase, _ := stringAttr(r.Item, attrGenerationState)
		succ, _ := stringAttr(r.Item, attrSuccessorPrefix)
		succCount, _ := intAttr(r.Item, attrSuccessorBuckets)
		return fmt.Errorf("outboxddb: %s: %w: generation %s/%d is %s; switch the writer to key prefix %q and bucket count %d",
			what, outbox.ErrGenerationSealed, w.opts.KeyPrefix, w.opts.BucketCount, phase, succ, succCount)
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
