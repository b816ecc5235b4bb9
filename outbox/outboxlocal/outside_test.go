package outboxlocal

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
)

func TestOutside(t *testing.T) {
	// A bubble's client of an external endpoint keeps its connection across
	// the bubble's idle waits: one connection serves requests a simulated
	// minute apart. A connection kept inside the bubble would hold its clock
	// until the server dropped the idle connection (here after a second, as
	// DynamoDB Local's Jetty does after 30), and the next request would open
	// another; a client keeping no connection opens one per request.
	t.Run("InMemoryClientOfAnExternalEndpoint_KeepsItsConnectionAcrossIdleWaits", func(t *testing.T) {
		var opened atomic.Int32
		host := httptest.NewUnstartedServer(newEmbeddedServer(nil))
		host.Config.IdleTimeout = time.Second
		host.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				opened.Add(1)
			}
		}
		host.Start()
		t.Cleanup(host.Close)

		synctest.Test(t, func(t *testing.T) {
			d := newDynamoDB(t, WithEndpoint(host.URL), InMemory())
			table := createTable(t, d)
			start := time.Now()
			for range 3 {
				time.Sleep(time.Minute)
				if _, err := d.Client.GetItem(t.Context(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("P", "S")}); err != nil {
					t.Fatal(err)
				}
			}
			if got := time.Since(start); got != 3*time.Minute {
				t.Fatalf("the bubble's clock moved %v, want the 3m it slept", got)
			}
		})
		if n := opened.Load(); n != 1 {
			t.Fatalf("%d connections opened, want 1 kept alive across the bubble's waits", n)
		}
	})
}
