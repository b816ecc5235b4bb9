package emf

// validUnits is the CloudWatch StandardUnit enumeration, the only units an
// EMF MetricDefinition may name.
var validUnits = map[string]bool{
	"Seconds": true, "Microseconds": true, "Milliseconds": true,
	"Bytes": true, "Kilobytes": true, "Megabytes": true, "Gigabytes": true, "Terabytes": true,
	"Bits": true, "Kilobits": true, "Megabits": true, "Gigabits": true, "Terabits": true,
	"Percent": true, "Count": true,
	"Bytes/Second": true, "Kilobytes/Second": true, "Megabytes/Second": true,
	"Gigabytes/Second": true, "Terabytes/Second": true,
	"Bits/Second": true, "Kilobits/Second": true, "Megabits/Second": true,
	"Gigabits/Second": true, "Terabits/Second": true,
	"Count/Second": true, "None": true,
}

// ValidUnit reports whether unit is a CloudWatch standard unit.
func ValidUnit(unit string) bool { return validUnits[unit] }
