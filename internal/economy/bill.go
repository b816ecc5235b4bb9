package economy

import (
	"math"
	"time"

	"github.com/spillway-dev/spillway/internal/steady"
	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxlocal"
)

// Anchor parameters: the documented models' inputs.
const (
	// FargateVCPU and FargateMemoryGB size the always-on relay's task.
	FargateVCPU     = 0.25
	FargateMemoryGB = 0.5
	// StreamsBatchSize and StreamsWindow are the event source mapping's
	// batch size and batching window.
	StreamsBatchSize = 100
	StreamsWindow    = time.Second
	// StreamsInvocationTime is one stream batch's billed duration: one
	// produce round trip (the steady scenario's 10 ms) and 5 ms of handler.
	StreamsInvocationTime = 15 * time.Millisecond
	// StreamsMemoryMB is the stream consumer's memory.
	StreamsMemoryMB = 128
	// StreamsTTL is how long an outbox item stays in the table before its
	// TTL deletes it (free), which sets the stored size.
	StreamsTTL = 24 * time.Hour
	// itemOverhead is what an outbox item adds to its value: key, ids,
	// topic, timestamps, sequence and TTL attributes.
	itemOverhead = 128
	// ScheduleInterval is the default deployment's sweep.
	ScheduleInterval = time.Minute
)

// Line is one part of one deployment's bill at one rate. Figures that do
// not apply to the part are zero.
type Line struct {
	Deployment string  `json:"deployment"`
	Rate       float64 `json:"rate"`
	Part       string  `json:"part"`
	// USDPerMonth is the part's monthly cost; USDPerMillion per million
	// messages (zero at 0 messages/s).
	USDPerMonth   float64 `json:"usdPerMonth"`
	USDPerMillion float64 `json:"usdPerMillionMessages"`
	// DynamoDB units per message and per month (the dynamodb part).
	WriteUnitsPerMessage float64 `json:"writeUnitsPerMessage,omitempty"`
	ReadUnitsPerMessage  float64 `json:"readUnitsPerMessage,omitempty"`
	WriteUnitsPerMonth   float64 `json:"writeUnitsPerMonth,omitempty"`
	ReadUnitsPerMonth    float64 `json:"readUnitsPerMonth,omitempty"`
	// Lambda invocations per message and per month (the requests part).
	InvocationsPerMessage float64 `json:"invocationsPerMessage,omitempty"`
	InvocationsPerMonth   float64 `json:"invocationsPerMonth,omitempty"`
	// GBSecondsPerMonth of Lambda duration (the duration part).
	GBSecondsPerMonth float64 `json:"gbSecondsPerMonth,omitempty"`
	// Modelled reports figures from a model rather than a run.
	Modelled bool `json:"modelled,omitempty"`
}

// messagesPerMonth is the traffic of a month at rate.
func messagesPerMonth(rate float64) float64 { return rate * SecondsPerMonth }

// perMessage divides a monthly figure by the month's messages; 0 at rate 0.
func perMessage(monthly, rate float64) float64 {
	if rate <= 0 {
		return 0
	}
	return monthly / messagesPerMonth(rate)
}

// bill completes the lines of one deployment: per-million figures and the
// total.
func bill(deployment string, rate float64, parts []Line) []Line {
	total := Line{Deployment: deployment, Rate: rate, Part: PartTotal}
	for i := range parts {
		parts[i].Deployment, parts[i].Rate = deployment, rate
		parts[i].USDPerMillion = perMessage(parts[i].USDPerMonth, rate) * 1e6
		total.USDPerMonth += parts[i].USDPerMonth
		total.Modelled = total.Modelled || parts[i].Modelled
	}
	total.USDPerMillion = perMessage(total.USDPerMonth, rate) * 1e6
	return append(parts, total)
}

// dynamoLine prices monthly DynamoDB units.
func dynamoLine(p Prices, rate, wu, ru float64) Line {
	return Line{
		Part: PartDynamoDB, USDPerMonth: p.USD(wu, ru),
		WriteUnitsPerMonth: wu, ReadUnitsPerMonth: ru,
		WriteUnitsPerMessage: perMessage(wu, rate), ReadUnitsPerMessage: perMessage(ru, rate),
	}
}

// lambdaLines prices monthly invocations and GB-seconds.
func lambdaLines(p Prices, rate, invocations, gbSeconds float64) []Line {
	return []Line{
		{Part: PartLambdaRequests, USDPerMonth: invocations * p.LambdaRequest / 1e6,
			InvocationsPerMonth: invocations, InvocationsPerMessage: perMessage(invocations, rate)},
		{Part: PartLambdaDuration, USDPerMonth: gbSeconds * p.LambdaGBSecond, GBSecondsPerMonth: gbSeconds},
	}
}

// spillwayBill prices the default deployment from its run.
func spillwayBill(p Prices, cfg Config, m Measured) []Line {
	gbs := m.perMonth(m.FunctionTime.Seconds()) * float64(cfg.MemoryMB) / 1024
	sweeps := SecondsPerMonth / ScheduleInterval.Seconds()
	parts := []Line{dynamoLine(p, m.Config.Rate, m.perMonth(m.Counter.WriteUnits), m.perMonth(m.Counter.ReadUnits))}
	parts = append(parts, lambdaLines(p, m.Config.Rate, m.perMonth(float64(m.Invocations)), gbs)...)
	parts = append(parts, Line{Part: PartSchedule, USDPerMonth: sweeps * p.SchedulerInvocation / 1e6})
	return bill(Spillway, m.Config.Rate, parts)
}

// modelledIdleHold is an always-on relay's requests with nothing to relay,
// over m's write time: one heartbeat and one keep per bucket every renewal
// (1 write unit each), one eventually consistent head probe per bucket
// every poll (0.5 read units each).
func modelledIdleHold(cfg Config, m Measured) Measured {
	secs := m.Config.Duration.Seconds()
	renew := outbox.DefaultLeaseRenewInterval.Seconds()
	poll := outbox.DefaultPollInterval.Seconds()
	return Measured{Modelled: true, Report: steady.Report{
		Config: steady.Config{Rate: m.Config.Rate, Duration: m.Config.Duration}, Relay: outbox.RelayOptions{Mode: outbox.ModeHold}, Simulated: m.Config.Duration,
		Counter: outboxlocal.Counts{WriteUnits: secs / renew * float64(1+cfg.Buckets), ReadUnits: secs / poll * float64(cfg.Buckets) * 0.5},
	}}
}

// fargateBill prices the always-on relay: the task all month, and the
// DynamoDB requests of a relay in hold mode on the same traffic.
func fargateBill(p Prices, rate float64, hold Measured) []Line {
	task := (FargateVCPU*p.FargateVCPUHour + FargateMemoryGB*p.FargateGBHour) * SecondsPerMonth / 3600
	ddb := dynamoLine(p, rate, hold.perMonth(hold.Counter.WriteUnits), hold.perMonth(hold.Counter.ReadUnits))
	ddb.Modelled = hold.Modelled
	return bill(Fargate, rate, []Line{ddb, {Part: PartFargate, USDPerMonth: task}})
}

// streamsBill prices the DynamoDB Streams → Lambda pattern: the outbox item
// put in the business transaction (transactional writes cost twice), kept
// until its TTL deletes it; stream reads by a Lambda trigger are free; one
// invocation per batching window while traffic lasts, one per batch beyond
// StreamsBatchSize messages a window.
func streamsBill(p Prices, cfg Config, rate float64) []Line {
	item := float64(cfg.ValueSize + itemOverhead)
	wu := 2 * math.Ceil(item/1024) * messagesPerMonth(rate)
	storedGB := rate * StreamsTTL.Seconds() * item / (1 << 30)
	ddb := dynamoLine(p, rate, wu, 0)
	ddb.USDPerMonth += storedGB * p.StorageGBMonth
	window := StreamsWindow.Seconds()
	batchesPerSecond := max(min(rate, 1/window), rate/StreamsBatchSize)
	invocations := batchesPerSecond * SecondsPerMonth
	gbs := invocations * StreamsInvocationTime.Seconds() * StreamsMemoryMB / 1024
	parts := append([]Line{ddb}, lambdaLines(p, rate, invocations, gbs)...)
	for i := range parts {
		parts[i].Modelled = true
	}
	return bill(Streams, rate, parts)
}
