package outboxtest

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/aws/aws-xray-sdk-go/strategy/sampling"
	awsxray "github.com/aws/aws-xray-sdk-go/xray"
)

// header is the line that opens every datagram the SDK sends.
const header = `{"format": "json", "version": 1}`

// alwaysSample samples every root segment: the SDK's default rules sample
// one request per second, which would drop a test's second segment.
type alwaysSample struct{}

func (alwaysSample) ShouldTrace(*sampling.Request) *sampling.Decision {
	return &sampling.Decision{Sample: true}
}

// XRayDaemon stands in for the X-Ray daemon: a UDP socket on 127.0.0.1
// that the X-Ray SDK's emitter is pointed at, and the documents it sent. The SDK's configuration is
// process-wide, so tests using an XRayDaemon must not run in parallel.
type XRayDaemon struct{ conn net.PacketConn }

// NewXRayDaemon opens the socket, points the SDK at it with every segment
// sampled, and closes it when the test ends.
func NewXRayDaemon(t *testing.T) *XRayDaemon {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if err := awsxray.Configure(awsxray.Config{DaemonAddr: conn.LocalAddr().String(), SamplingStrategy: alwaysSample{}}); err != nil {
		t.Fatal(err)
	}
	return &XRayDaemon{conn: conn}
}

// Next returns the body of the next document the SDK sent, failing the test
// when none arrives within 10 s or the datagram lacks the daemon header. The
// deadline only bounds a failing test; a passing one never waits on it.
func (d *XRayDaemon) Next(t *testing.T) []byte {
	t.Helper()
	body, err := d.read(10 * time.Second)
	if err != nil {
		t.Fatalf("no document from the SDK: %v", err)
	}
	return body
}

// Sent returns the bodies of every document already sent. Subsegments are
// sent when they end, so after the traced call returns they are in the
// socket's buffer; the short read deadline only ends the drain.
func (d *XRayDaemon) Sent(t *testing.T) [][]byte {
	t.Helper()
	var out [][]byte
	for {
		body, err := d.read(200 * time.Millisecond)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, body)
	}
}

func (d *XRayDaemon) read(wait time.Duration) ([]byte, error) {
	if err := d.conn.SetReadDeadline(time.Now().Add(wait)); err != nil {
		return nil, err
	}
	buf := make([]byte, 64<<10)
	n, _, err := d.conn.ReadFrom(buf)
	if err != nil {
		return nil, err
	}
	head, body, ok := bytes.Cut(buf[:n], []byte("\n"))
	if !ok || string(head) != header {
		return nil, errors.New("datagram without the daemon header: " + string(buf[:n]))
	}
	return body, nil
}
