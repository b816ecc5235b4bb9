package outboxinbox_test

import (
	"context"
	"errors"
	"testing"

	"github.com/spillway-dev/spillway/outbox"
	"github.com/spillway-dev/spillway/outbox/outboxddb"
	"github.com/spillway-dev/spillway/outbox/outboxinbox"
	"github.com/spillway-dev/spillway/outbox/outboxtest"
)

func TestExplain(t *testing.T) {
	// An inbox whose marker table does not exist names it, the endpoint and
	// the command that creates it, as the outbox's writer does; the message
	// stays in front.
	t.Run("AMissingMarkerTableIsNamedWithItsEndpointAndTheFix", func(t *testing.T) {
		db := outboxtest.NewDynamoDB(t)
		missing := db.NewTableName()
		in, err := outboxinbox.New(db.Client, outboxinbox.Options{TableName: missing, Consumer: "billing", Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		id := outbox.NewMessageID()
		_, err = in.Process(t.Context(), record("orders", 0, 1, "order-1", "paid", id), func(context.Context, outboxinbox.Record, *outboxinbox.Tx) error { return nil })
		want := "outboxinbox: read marker of message " + id.String() + ": operation error DynamoDB: GetItem, table " + missing + " not found at " + db.Endpoint +
			": check the table's name and the endpoint, or create it with `spillway create-table --table " + missing + "`"
		if err == nil || err.Error() != want || !errors.As(err, new(*outboxddb.TableNotFoundError)) {
			t.Errorf("error %v,\nwant %s", err, want)
		}
	})
}
