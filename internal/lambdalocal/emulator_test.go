//go:build unix

package lambdalocal

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// rie is where `make tools` installs the emulator.
var rie = filepath.Join("..", "..", "bin", "aws-lambda-rie")

// lockedBuffer collects the emulator's two output streams.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func TestEmulator(t *testing.T) {
	// Close ends the function before the emulator, so the function never
	// reports the emulator gone: `make invoke` ends on the last response.
	t.Run("CloseEndsTheFunctionQuietly", func(t *testing.T) {
		if _, err := os.Stat(rie); err != nil {
			t.Skipf("skipping: %s is missing (run `make tools` to install aws-lambda-rie %s)", rie, RIEVersion)
		}
		bootstrap := filepath.Join(t.TempDir(), "bootstrap")
		if err := Build(t.Context(), filepath.Join("testdata", "echo"), bootstrap); err != nil {
			t.Fatal(err)
		}
		out := &lockedBuffer{}
		em, err := Start(t.Context(), Options{RIE: rie, Bootstrap: bootstrap, Env: []string{"PATH=" + os.Getenv("PATH")}, Output: out})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := em.Invoke(t.Context(), []byte(`{"hello":"world"}`))
		if err != nil || resp.Failed() || string(resp.Payload) != `{"hello":"world"}` {
			em.Close()
			t.Fatalf("invoke: %s, %v", resp.Payload, err)
		}
		em.Close()
		for _, noise := range []string{"unreachable code", "failed to get the next invoke", "connection refused", "connection reset"} {
			if strings.Contains(out.String(), noise) {
				t.Errorf("the output after Close says %q:\n%s", noise, out.String())
			}
		}
	})
}
