package outboxlambda

import (
	"cmp"
	"runtime/debug"
	"strconv"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// SetMemoryLimit sets the Go runtime's soft memory limit to the relay's
// outbox.MemoryBudget.SoftLimit for its memory (SPILLWAY_MEMORY_MB, else
// the function's AWS_LAMBDA_FUNCTION_MEMORY_SIZE): 85% of it less the
// binary's footprint, so the collector works harder before the process
// nears the memory Lambda would stop it at. GOMEMLIMIT, when set, wins and
// nothing changes. It returns the limit set, 0 for none.
func SetMemoryLimit(getenv func(string) string) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	mb, err := strconv.Atoi(cmp.Or(getenv(outboxconf.EnvMemoryMB), getenv(outboxconf.EnvLambdaMemory)))
	if err != nil || mb <= 0 {
		return 0
	}
	limit := outbox.MemoryBudgetFor(int64(mb) << 20).SoftLimit
	debug.SetMemoryLimit(limit)
	return limit
}
