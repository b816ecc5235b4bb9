package bench

// Prices are DynamoDB on-demand prices in USD per million request units.
type Prices struct {
	// WriteUnit and ReadUnit are USD per million write and read request
	// units.
	WriteUnit, ReadUnit float64
	// Source says where the figures come from.
	Source string
}

// OnDemandPrices are the on-demand prices the cost tables use: us-east-1
// after the 2024-11-01 reduction, as recorded in the project's ecosystem
// notes (shared/spec/ecosystem.md, C7). Other regions cost more.
var OnDemandPrices = Prices{
	WriteUnit: 0.625,
	ReadUnit:  0.125,
	Source:    "DynamoDB on-demand, us-east-1 after the 2024-11-01 cut: $0.625 per million WRU, $0.125 per million RRU (ecosystem.md C7)",
}

// USD returns what the given units cost.
func (p Prices) USD(writeUnits, readUnits float64) float64 {
	return (writeUnits*p.WriteUnit + readUnits*p.ReadUnit) / 1e6
}

// hoursPerMonth converts hourly to monthly figures (30-day month).
const hoursPerMonth = 24 * 30
