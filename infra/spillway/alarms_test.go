package spillway

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// alarmSpec is the part of an alarm that decides when it fires.
type alarmSpec struct {
	Metric     string
	Namespace  string
	Statistic  string
	Period     float64
	Threshold  float64
	Periods    float64
	Datapoints float64
}

func TestAlarms(t *testing.T) {
	t.Run("WatchBacklogFailuresTheRelayAndTheTable", func(t *testing.T) {
		f := synth(t, func(p *OutboxProps) {
			p.Alarms.TopicArn = "arn:aws:sns:eu-west-1:123456789012:ops"
		})
		// The relay's name is CloudFormation's: a reference to the function.
		relayName := map[string]any{"Ref": f.functionID(f.outbox.relay.fn)}
		got := map[string]alarmSpec{}
		for _, id := range f.ofType("AWS::CloudWatch::Alarm") {
			a := f.props(id)
			// Logical ids are Outbox + Alarms + id + an 8-character hash.
			name := strings.SplitN(id, "Alarms", 2)[1]
			name = name[:len(name)-8]
			// Only the liveness alarm fires below its threshold and counts
			// missing data (a silent fleet) as breaching.
			op, missing := "GreaterThanThreshold", "notBreaching"
			switch name {
			case "RelayNotRunning":
				op, missing = "LessThanThreshold", "breaching"
			case "StrandedMessages":
				// Counted every 5 minutes by working relays only: an idle
				// outbox keeps the alarm's state.
				missing = "ignore"
			}
			assertJSON(t, name+" comparison", a["ComparisonOperator"], op)
			assertJSON(t, name+" missing data", a["TreatMissingData"], missing)
			assertJSON(t, name+" alarm actions", a["AlarmActions"], []any{"arn:aws:sns:eu-west-1:123456789012:ops"})
			assertJSON(t, name+" ok actions", a["OKActions"], []any{"arn:aws:sns:eu-west-1:123456789012:ops"})
			spec := alarmSpec{Threshold: a["Threshold"].(float64), Periods: a["EvaluationPeriods"].(float64), Datapoints: a["DatapointsToAlarm"].(float64)}
			if metrics, ok := a["Metrics"]; ok {
				// The table alarm sums ThrottledRequests over the operations.
				spec.Metric = canonical(metrics)
			} else {
				spec.Metric, _ = a["MetricName"].(string)
				spec.Namespace, _ = a["Namespace"].(string)
				spec.Statistic, _ = a["Statistic"].(string)
				if spec.Statistic == "" {
					spec.Statistic, _ = a["ExtendedStatistic"].(string)
				}
				spec.Period = a["Period"].(float64)
				dims := map[string]any{}
				for _, d := range a["Dimensions"].([]any) {
					dims[d.(map[string]any)["Name"].(string)] = d.(map[string]any)["Value"]
				}
				fn := f.outbox.relay.fn
				if strings.HasPrefix(name, "Enqueue") {
					fn = f.outbox.enqueue.fn
				}
				if spec.Namespace == outboxconf.DefaultMetricsNamespace {
					assertJSON(t, name+" dimensions", dims, map[string]any{outboxconf.DimensionOutbox: "OUTBOX", outboxconf.DimensionFunction: relayName})
				} else {
					assertJSON(t, name+" dimensions", dims, map[string]any{"FunctionName": map[string]any{"Ref": f.functionID(fn)}})
				}
			}
			got[name] = spec
		}
		timeoutMs := 900_000.0
		want := map[string]alarmSpec{
			"OldestPendingAge": {outboxconf.MetricOldestPendingAge, "Spillway", "Maximum", 60, 300, 1, 1},
			// Failures in 2 of the last 5 minutes.
			"PublishFailures": {outboxconf.MetricPublishFailures, "Spillway", "Sum", 60, 0, 5, 2},
			"ParkedMessages":  {outboxconf.MetricParkedMessages, "Spillway", "Maximum", 300, 0, 1, 1},
			// Any message beyond the bucket count, in a 15-minute window
			// holding three of the relays' counts.
			"StrandedMessages": {outboxconf.MetricStrandedMessages, "Spillway", "Maximum", 900, 0, 1, 1},
			// No run completed (no end-of-run document) in 10 minutes.
			"RelayNotRunning":         {outboxconf.MetricBudgetUsed, "Spillway", "SampleCount", 600, 1, 1, 1},
			"ReleasesSkipped":         {outboxconf.MetricReleasesSkipped, "Spillway", "Sum", 300, 0, 1, 1},
			"RelayErrors":             {"Errors", "AWS/Lambda", "Sum", 300, 0, 1, 1},
			"RelayAsyncEventsDropped": {"AsyncEventsDropped", "AWS/Lambda", "Sum", 300, 0, 1, 1},
			"RelayThrottles":          {"Throttles", "AWS/Lambda", "Sum", 60, relayThrottleThreshold, 5, 5},
			// Half the 5 s stop margin before the 15 min timeout.
			"RelayDuration":    {"Duration", "AWS/Lambda", "p99", 300, timeoutMs - 2500, 1, 1},
			"EnqueueErrors":    {"Errors", "AWS/Lambda", "Sum", 300, 0, 1, 1},
			"EnqueueThrottles": {"Throttles", "AWS/Lambda", "Sum", 300, 0, 1, 1},
			// 90 % of the 30 s enqueue timeout.
			"EnqueueDuration": {"Duration", "AWS/Lambda", "Maximum", 300, 27_000, 1, 1},
			"TableThrottles":  {Threshold: 0, Periods: 1, Datapoints: 1},
		}
		tableMetrics := got["TableThrottles"].Metric
		got["TableThrottles"] = alarmSpec{Threshold: got["TableThrottles"].Threshold, Periods: 1, Datapoints: 1}
		assertJSON(t, "alarms", got, want)

		var throttled []map[string]any
		if err := json.Unmarshal([]byte(tableMetrics), &throttled); err != nil {
			t.Fatal(err)
		}
		var ops []string
		for _, m := range throttled {
			stat, ok := m["MetricStat"].(map[string]any)
			if !ok {
				mustContain(t, m["Expression"].(string), "+")
				continue
			}
			metric := stat["Metric"].(map[string]any)
			if metric["MetricName"] != "ThrottledRequests" || metric["Namespace"] != "AWS/DynamoDB" || stat["Stat"] != "Sum" {
				t.Errorf("table throttle input %v", m)
			}
			for _, d := range metric["Dimensions"].([]any) {
				if d.(map[string]any)["Name"] == "Operation" {
					ops = append(ops, d.(map[string]any)["Value"].(string))
				}
			}
		}
		slices.Sort(ops)
		assertJSON(t, "throttle operations", ops, []string{"BatchWriteItem", "DeleteItem", "PutItem", "Query", "TransactWriteItems", "UpdateItem"})
	})

	t.Run("AlarmThresholdsAreConfigurableAndEmailGetsAnEncryptedTopic", func(t *testing.T) {
		f := synth(t, func(p *OutboxProps) {
			p.Alarms = AlarmProps{Email: "ops@example.com", OldestPendingAge: 90 * time.Second, PublishFailures: 3, DurationPercent: 90}
		})
		thresholds := map[string]any{}
		topicID := f.ofType("AWS::SNS::Topic")[0]
		for _, id := range f.ofType("AWS::CloudWatch::Alarm") {
			a := f.props(id)
			if _, ok := a["MetricName"].(string); ok {
				name := strings.SplitN(id, "Alarms", 2)[1]
				thresholds[name[:len(name)-8]] = a["Threshold"]
			}
			assertJSON(t, id+" actions", a["AlarmActions"], []any{map[string]any{"Ref": topicID}})
		}
		assertJSON(t, "OldestPendingAge", thresholds["OldestPendingAge"], 90)
		assertJSON(t, "PublishFailures", thresholds["PublishFailures"], 3)
		assertJSON(t, "Duration", thresholds["RelayDuration"], 810000)
		assertJSON(t, "subscription", f.only("AWS::SNS::Subscription"), map[string]any{
			"Protocol": "email", "Endpoint": "ops@example.com", "TopicArn": map[string]any{"Ref": topicID},
		})
		keyID := f.ofType("AWS::KMS::Key")[0]
		assertJSON(t, "topic", f.props(topicID), map[string]any{
			"DisplayName":    "Spillway alarms",
			"KmsMasterKeyId": map[string]any{"Fn::GetAtt": []any{keyID, "Arn"}},
		})
		key := f.props(keyID)
		assertJSON(t, "key rotation", key["EnableKeyRotation"], true)
		statements := key["KeyPolicy"].(map[string]any)["Statement"].([]any)
		assertJSON(t, "CloudWatch's use of the key", statements[len(statements)-1], map[string]any{
			"Action": []any{"kms:Decrypt", "kms:GenerateDataKey*"}, "Effect": "Allow",
			"Principal": map[string]any{"Service": "cloudwatch.amazonaws.com"}, "Resource": "*",
			"Condition": map[string]any{
				"StringEquals": map[string]any{"aws:SourceAccount": map[string]any{"Ref": "AWS::AccountId"}},
				"ArnLike": map[string]any{"aws:SourceArn": map[string]any{"Fn::Join": []any{"", []any{
					"arn:", map[string]any{"Ref": "AWS::Partition"}, ":cloudwatch:", map[string]any{"Ref": "AWS::Region"}, ":",
					map[string]any{"Ref": "AWS::AccountId"}, ":alarm:*",
				}}}},
			},
		})
	})

	t.Run("NoAlarmActionsWithoutATopic", func(t *testing.T) {
		f := synth(t, nil)
		if n := len(f.ofType("AWS::CloudWatch::Alarm")); n != 14 {
			t.Errorf("want 14 alarms, got %d", n)
		}
		for _, id := range f.ofType("AWS::CloudWatch::Alarm") {
			if actions, ok := f.props(id)["AlarmActions"]; ok {
				t.Errorf("%s notifies %v without a topic", id, actions)
			}
		}
		if ids := f.ofType("AWS::SNS::Topic"); len(ids) != 0 {
			t.Errorf("created a topic without an e-mail: %v", ids)
		}
	})

	t.Run("DashboardShowsEveryOutboxMetric", func(t *testing.T) {
		f := synth(t, func(p *OutboxProps) { p.MetricsNamespace = "Acme/Outbox"; p.OutboxName = "orders" })
		// The body is a Fn::Join of literal JSON and function-name tokens;
		// render the tokens as placeholders to read it as JSON.
		parts := f.only("AWS::CloudWatch::Dashboard")["DashboardBody"].(map[string]any)["Fn::Join"].([]any)[1].([]any)
		var body strings.Builder
		for _, p := range parts {
			switch v := p.(type) {
			case string:
				body.WriteString(v)
			case map[string]any:
				ref, ok := v["Ref"]
				if !ok {
					ref = v["Fn::GetAtt"].([]any)[0]
				}
				body.WriteString("@" + ref.(string) + "@")
			}
		}
		var doc struct {
			Widgets []struct {
				Properties struct {
					Title   string
					Metrics [][]any
				}
			}
		}
		if err := json.Unmarshal([]byte(body.String()), &doc); err != nil {
			t.Fatalf("dashboard body is not JSON: %v\n%s", err, body.String())
		}
		titles := map[string][]string{}
		for _, w := range doc.Widgets {
			for _, m := range w.Properties.Metrics {
				titles[w.Properties.Title] = append(titles[w.Properties.Title], canonical(m))
			}
		}
		enqueue := "@" + f.functionID(f.outbox.enqueue.fn) + "@"
		emfMetric := func(name, fn string) string {
			return `"Acme/Outbox","` + name + `","FunctionName","` + fn + `","Outbox","orders"`
		}
		has := func(title string, fragments ...string) {
			t.Helper()
			all := strings.Join(titles[title], "\n")
			for _, fr := range fragments {
				if !strings.Contains(all, fr) {
					t.Errorf("widget %q lacks %s\nhas %s", title, fr, all)
				}
			}
		}
		r := "@" + f.functionID(f.outbox.relay.fn) + "@"
		has("Backlog", emfMetric(outboxconf.MetricPendingMessages, r), emfMetric(outboxconf.MetricStrandedMessages, r), emfMetric(outboxconf.MetricOldestPendingAge, r))
		has("Throughput", emfMetric(outboxconf.MetricMessagesPublished, r), emfMetric(outboxconf.MetricMessagesEnqueued, enqueue), emfMetric(outboxconf.MetricPublishFailures, r))
		has("Publish latency (commit to ack)", emfMetric(outboxconf.MetricPublishLatency, r), `"stat":"p50"`, `"stat":"p99"`)
		has("Leases", emfMetric(outboxconf.MetricOwnedBuckets, r), emfMetric(outboxconf.MetricLeaseClaims, r),
			emfMetric(outboxconf.MetricLeaseReleases, r), emfMetric(outboxconf.MetricLeaseLosses, r),
			emfMetric(outboxconf.MetricRefusedConditionalWrites, r))
		has("Cost per published message (capacity units)",
			`"expression":"(writeunits_relay + writeunits_enqueue) / published"`,
			`"expression":"(readunits_relay + readunits_enqueue) / published"`,
			emfMetric(outboxconf.MetricWriteUnits, r), emfMetric(outboxconf.MetricWriteUnits, enqueue),
			emfMetric(outboxconf.MetricReadUnits, r), emfMetric(outboxconf.MetricReadUnits, enqueue))
		has("Relay function", `"AWS/Lambda","Invocations"`, `"AWS/Lambda","Errors"`, `"AWS/Lambda","Throttles"`, `"AWS/Lambda","Duration"`)
		has("Poison messages", emfMetric(outboxconf.MetricMessagesParked, r), emfMetric(outboxconf.MetricMessagesReplayed, r),
			emfMetric(outboxconf.MetricParkedMessages, r), emfMetric(outboxconf.MetricHeadRowRetries, r))
		has("Relay wake-ups and runs", emfMetric(outboxconf.MetricWakeUpsSent, r), `"AWS/Lambda","AsyncEventsDropped"`, emfMetric(outboxconf.MetricBudgetUsed, r), `"stat":"SampleCount"`)
		has("Enqueue function", `"AWS/Lambda","Invocations","FunctionName","`+enqueue, `"AWS/Lambda","Errors","FunctionName","`+enqueue,
			`"AWS/Lambda","Throttles","FunctionName","`+enqueue, `"AWS/Lambda","Duration","FunctionName","`+enqueue, emfMetric(outboxconf.MetricEnqueueRejected, enqueue))
		has("DynamoDB requests and throttles", emfMetric(outboxconf.MetricDynamoDBRequests, r), emfMetric(outboxconf.MetricThrottles, enqueue))
		if !strings.Contains(body.String(), `"title":"Alarms"`) {
			t.Error("dashboard lacks the alarm status widget")
		}
	})
}
