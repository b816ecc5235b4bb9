package bench

import "fmt"

// Formatting helpers shared by the scenarios' tables.

func fmtInt(n int) string { return fmt.Sprintf("%d", n) }

func fmtF(v float64, decimals int) string { return fmt.Sprintf("%.*f", decimals, v) }

func fmtUSD(v float64) string {
	switch {
	case v == 0:
		return "$0"
	case v < 0.0001:
		return fmt.Sprintf("$%.7f", v)
	case v < 0.01:
		return fmt.Sprintf("$%.5f", v)
	default:
		return fmt.Sprintf("$%.2f", v)
	}
}

func fmtPct(v float64) string { return fmt.Sprintf("%.0f%%", v) }
