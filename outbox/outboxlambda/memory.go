package outboxlambda

import (
	"runtime/debug"
	"strconv"

	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// SetMemoryLimit sets the Go runtime's soft memory limit to 90% of the
// function's memory (AWS_LAMBDA_FUNCTION_MEMORY_SIZE), so the collector
// works harder before Lambda would stop the function for running out of
// memory. GOMEMLIMIT, when set, wins and nothing changes. It returns the
// limit set, 0 for none.
func SetMemoryLimit(getenv func(string) string) int64 {
	if getenv("GOMEMLIMIT") != "" {
		return 0
	}
	mb, err := strconv.Atoi(getenv(outboxconf.EnvLambdaMemory))
	if err != nil || mb <= 0 {
		return 0
	}
	limit := int64(mb) << 20 * 9 / 10
	debug.SetMemoryLimit(limit)
	return limit
}
