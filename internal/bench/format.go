package bench

import "fmt"

// Formatting helpers shared by the scenarios' tables.

func fmtInt(n int) string { return fmt.Sprintf("%d", n) }

func fmtF(v float64, decimals int) string { return fmt.Sprintf("%.*f", decimals, v) }

func fmtPct(v float64) string { return fmt.Sprintf("%.0f%%", v) }
