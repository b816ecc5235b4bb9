package spillway

import (
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

func TestLayout(t *testing.T) {
	// Every deployment writes the layout record of its key prefix with the
	// stack's count, on create and on update, conditional on no record of
	// another count: a bucketCount edited in place fails the deployment.
	t.Run("EveryDeploymentRecordsTheStacksCount", func(t *testing.T) {
		f := synth(t, func(p *OutboxProps) { p.KeyPrefix, p.BucketCount, p.ReservedConcurrency = "ORDERS", 16, 4 })
		var record []string
		for _, id := range f.ofType("Custom::AWS") {
			if strings.Contains(id, "LayoutRecord") {
				record = append(record, id)
			}
		}
		if len(record) != 1 {
			t.Fatalf("layout records %v, want one", record)
		}
		props := f.props(record[0])
		for _, phase := range []string{"Create", "Update"} {
			// The table's name is a reference: the call is a join of JSON
			// text around it.
			var text string
			switch v := props[phase].(type) {
			case string:
				text = v
			case map[string]any:
				for _, part := range v["Fn::Join"].([]any)[1].([]any) {
					if s, ok := part.(string); ok {
						text += s
					} else {
						text += canonical(part)
					}
				}
			}
			mustContain(t, text, `"service":"DynamoDB"`, `"action":"updateItem"`,
				`"ORDERS#COORDINATION"`, `"`+outboxconf.LayoutSortKey+`"`,
				`"ConditionExpression":"`+outboxconf.LayoutFits+`"`, `"UpdateExpression":"`+outboxconf.LayoutUpdateUndated+`"`,
				`":count":{"N":"16"}`, `":by":{"S":"CDK stack `)
		}
	})
}
