package economy

// Prices is the one price table every cost figure uses: AWS on-demand list
// prices in USD for us-east-1, arm64 where the service distinguishes it. A
// price change is one edit of OnDemandPrices.
type Prices struct {
	// WriteUnit and ReadUnit are DynamoDB on-demand USD per million write
	// and read request units.
	WriteUnit, ReadUnit float64
	// StorageGBMonth is DynamoDB Standard table storage, USD per GB-month
	// (the first 25 GB of the free tier are ignored).
	StorageGBMonth float64
	// LambdaRequest is USD per million Lambda requests; LambdaGBSecond is
	// USD per GB-second of arm64 function duration (first tier).
	LambdaRequest, LambdaGBSecond float64
	// FargateVCPUHour and FargateGBHour are ECS Fargate Linux/ARM, USD per
	// vCPU-hour and per GB-hour.
	FargateVCPUHour, FargateGBHour float64
	// SchedulerInvocation is EventBridge Scheduler, USD per million
	// invocations (the 14 million free each month are ignored).
	SchedulerInvocation float64
	// Date is when the figures were taken from the AWS pricing pages.
	Date string
	// Source says where the figures come from.
	Source string
}

// OnDemandPrices are the prices the cost tables use. Other regions cost
// more; free tiers are ignored throughout.
var OnDemandPrices = Prices{
	WriteUnit:           0.625,
	ReadUnit:            0.125,
	StorageGBMonth:      0.25,
	LambdaRequest:       0.20,
	LambdaGBSecond:      0.0000133334,
	FargateVCPUHour:     0.03238,
	FargateGBHour:       0.00356,
	SchedulerInvocation: 1.00,
	Date:                "2026-03-01",
	Source: "AWS list prices, us-east-1, on-demand, as of 2026-03-01: DynamoDB $0.625 per million WRU, $0.125 per million RRU " +
		"(after the 2024-11-01 cut, ecosystem.md C7), $0.25 per GB-month; Lambda arm64 $0.20 per million requests, " +
		"$0.0000133334 per GB-second; Fargate Linux/ARM $0.03238 per vCPU-hour, $0.00356 per GB-hour; " +
		"EventBridge Scheduler $1.00 per million invocations",
}

// USD returns what the given DynamoDB request units cost.
func (p Prices) USD(writeUnits, readUnits float64) float64 {
	return (writeUnits*p.WriteUnit + readUnits*p.ReadUnit) / 1e6
}

// hoursPerMonth converts hourly to monthly figures (30-day month).
const hoursPerMonth = 24 * 30

// SecondsPerMonth is the 30-day month of every monthly figure.
const SecondsPerMonth = hoursPerMonth * 3600
