package outboxddb

import (
	"math"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxconf"
)

// WriterOptionsFromEnv reads a writer's options from the variables the
// stack sets on its functions, so a service deployed next to the stack
// shares them: SPILLWAY_TABLE (required), SPILLWAY_PARTITION_KEY,
// SPILLWAY_SORT_KEY, SPILLWAY_KEY_PREFIX, SPILLWAY_BUCKET_COUNT,
// SPILLWAY_TOPICS and SPILLWAY_GENERATION_CHECK, each with the functions'
// default when unset. getenv is os.Getenv outside tests. The error is an
// *outboxconf.VariableError naming the first unusable variable, or for what
// no single variable decides (equal key attribute names) the options'
// validation error; both match outbox.ErrMisconfigured.
func WriterOptionsFromEnv(getenv func(string) string) (WriterOptions, error) {
	env := outboxconf.NewEnv(getenv)
	o := WriterOptions{
		Options: Options{
			TableName:    env.Required(outboxconf.EnvTable),
			PartitionKey: env.Name(outboxconf.EnvPartitionKey, DefaultPartitionKey),
			SortKey:      env.Name(outboxconf.EnvSortKey, DefaultSortKey),
			KeyPrefix:    env.Name(outboxconf.EnvKeyPrefix, DefaultKeyPrefix),
			BucketCount:  env.Int(outboxconf.EnvBucketCount, outbox.DefaultBucketCount, 1, math.MaxInt32),
		},
		Topics:          env.Topics(outboxconf.EnvTopics),
		GenerationCheck: env.Bool(outboxconf.EnvGenerationCheck, false),
	}
	if err := env.Err(); err != nil {
		return WriterOptions{}, err
	}
	if err := o.WithDefaults().Validate(); err != nil {
		return WriterOptions{}, err
	}
	return o, nil
}
