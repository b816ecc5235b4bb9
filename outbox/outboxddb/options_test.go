package outboxddb

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
)

func TestOptions(t *testing.T) {
	t.Run("Defaults", func(t *testing.T) {
		o := Options{TableName: "t"}.WithDefaults()
		if o.PartitionKey != "PK" || o.SortKey != "SK" || o.KeyPrefix != "OUTBOX" || o.BucketCount != 8 ||
			o.MaxConcurrency != 8 || o.Logger != slog.Default() {
			t.Fatalf("defaults %+v", o)
		}
		if _, ok := o.Clock.(outbox.SystemClock); !ok {
			t.Fatalf("default clock %T, want outbox.SystemClock", o.Clock)
		}
		if o.Hooks != nil {
			t.Fatal("hooks must default to none")
		}
		so := StoreOptions{Options: Options{TableName: "t"}}.WithDefaults()
		wo := WriterOptions{Options: Options{TableName: "t"}}.WithDefaults()
		if so.TableName != o.TableName || so.BucketCount != o.BucketCount || so.PendingCountLimit != 10000 || so.CountParked {
			t.Fatalf("store defaults %+v", so)
		}
		if wo.MaxCommitAttempts != DefaultMaxCommitAttempts || wo.Notifier != nil || wo.Getenv == nil || wo.GenerationCheck {
			t.Fatalf("writer defaults %+v", wo)
		}
		for _, err := range []error{o.Validate(), so.Validate(), wo.Validate()} {
			if err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("InvalidAreMisconfigurations", func(t *testing.T) {
		for name, c := range map[string]struct {
			edit func(*Options)
			want string
		}{
			"empty table":                 {func(o *Options) { o.TableName = "" }, "TableName"},
			"blank table":                 {func(o *Options) { o.TableName = "  " }, "TableName"},
			"blank partition key":         {func(o *Options) { o.PartitionKey = " " }, "PartitionKey"},
			"blank sort key":              {func(o *Options) { o.SortKey = "\t" }, "SortKey"},
			"same key names":              {func(o *Options) { o.SortKey = "PK" }, "must differ"},
			"blank prefix":                {func(o *Options) { o.KeyPrefix = " " }, "KeyPrefix"},
			"negative bucket count":       {func(o *Options) { o.BucketCount = -1 }, "BucketCount"},
			"negative concurrency":        {func(o *Options) { o.MaxConcurrency = -1 }, "MaxConcurrency"},
			"sort key named Topic":        {func(o *Options) { o.SortKey = "Topic" }, `"Topic"`},
			"partition key named Owner":   {func(o *Options) { o.PartitionKey = "Owner" }, `"Owner"`},
			"sort key named StoppedAtUtc": {func(o *Options) { o.SortKey = "StoppedAtUtc" }, `"StoppedAtUtc"`},
			"hook of the relay only":      {func(o *Options) { o.Hooks = []outbox.Hook{relayOnlyHook{}} }, "HookRequest"},
		} {
			t.Run(name, func(t *testing.T) {
				o := Options{TableName: "t"}.WithDefaults()
				c.edit(&o)
				err := o.Validate()
				if !errors.Is(err, outbox.ErrMisconfigured) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("Validate() = %v, want a misconfiguration mentioning %s", err, c.want)
				}
				if _, err := NewStore(&fakeDB{}, StoreOptions{Options: o}); !errors.Is(err, outbox.ErrMisconfigured) {
					t.Fatalf("NewStore accepted invalid options: %v", err)
				}
				if _, err := NewWriter(&fakeDB{}, WriterOptions{Options: o}); !errors.Is(err, outbox.ErrMisconfigured) {
					t.Fatalf("NewWriter accepted invalid options: %v", err)
				}
				if _, err := CreateTableInput(o); !errors.Is(err, outbox.ErrMisconfigured) {
					t.Fatalf("CreateTableInput accepted invalid options: %v", err)
				}
			})
		}
	})

	// InvalidOwnFieldsAreMisconfigurations: what only a store or only a
	// writer reads is validated by it.
	t.Run("InvalidOwnFieldsAreMisconfigurations", func(t *testing.T) {
		table := Options{TableName: "t"}
		if _, err := NewStore(&fakeDB{}, StoreOptions{Options: table, PendingCountLimit: -1}); !errors.Is(err, outbox.ErrMisconfigured) ||
			!strings.Contains(err.Error(), "PendingCountLimit") {
			t.Fatalf("NewStore with a negative pending limit: %v", err)
		}
		for name, c := range map[string]struct {
			opts WriterOptions
			want string
		}{
			"negative commit attempts": {WriterOptions{Options: table, MaxCommitAttempts: -1}, "MaxCommitAttempts"},
			"blank topic":              {WriterOptions{Options: table, Topics: []string{"orders", " "}}, "Topics[1]"},
			"half a previous":          {WriterOptions{Options: table, PreviousKeyPrefix: "OLD"}, "bucket count"},
		} {
			if _, err := NewWriter(&fakeDB{}, c.opts); !errors.Is(err, outbox.ErrMisconfigured) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewWriter with a %s: %v, want a misconfiguration mentioning %s", name, err, c.want)
			}
		}
	})

	t.Run("NilClientIsAMisconfiguration", func(t *testing.T) {
		if _, err := NewStore(nil, StoreOptions{Options: Options{TableName: "t"}}); !errors.Is(err, outbox.ErrMisconfigured) {
			t.Fatalf("NewStore(nil) = %v", err)
		}
		if _, err := NewWriter(nil, WriterOptions{Options: Options{TableName: "t"}}); !errors.Is(err, outbox.ErrMisconfigured) {
			t.Fatalf("NewWriter(nil) = %v", err)
		}
	})
}

// relayOnlyHook implements a relay's hook, none of the store's.
type relayOnlyHook struct{}

func (relayOnlyHook) OnWakeUp(outbox.WakeUp, error) {}
