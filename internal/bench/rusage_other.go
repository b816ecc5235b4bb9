//go:build !linux

package bench

import "os"

// childPeakRSSKB is 0 off Linux: the drain's own report (VmHWM) is used.
func childPeakRSSKB(*os.ProcessState) int64 { return 0 }
