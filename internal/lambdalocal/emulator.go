//go:build unix

// Package lambdalocal runs the functions' bootstrap binaries on this machine
// under the AWS Lambda Runtime Interface Emulator (aws-lambda-rie), the way
// Lambda runs them: one process per execution environment, the handler's
// deadline from AWS_LAMBDA_FUNCTION_TIMEOUT, one invoke at a time. It also
// serves a stand-in for the Lambda Invoke API that records the wake-ups a
// function sends, so nothing reaches AWS. Tests and `make invoke` use it.
//
// It is not internal/lambdasim, the in-process Lambda emulator of the
// demo and the simulations: that one runs the handlers as goroutines on a
// clock its caller drives (simulated time, reserved concurrency, queueing),
// while this one proves the built binaries themselves (their init, the
// Runtime API, environment variables, SIGTERM) on the wall clock. The two
// share no code because they share no mechanism: one schedules goroutines
// on a scheduler, the other starts processes and speaks HTTP.
package lambdalocal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// RIEVersion is the emulator version `make tools` installs into ./bin.
const RIEVersion = "v0.0.0-20261030222936-bef5c4ba774d"

// RIEPackage is the emulator's module path for go install.
const RIEPackage = "github.com/aws/aws-lambda-runtime-interface-emulator/cmd/aws-lambda-rie"

// startTimeout bounds the wait for the emulator to accept connections.
const startTimeout = 15 * time.Second

// Build compiles the function main in pkgDir into out for the host
// architecture with the tags Lambda builds use (lambda.norpc). It runs the
// go tool of GOROOT/PATH with the process environment.
func Build(ctx context.Context, pkgDir, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", "lambda.norpc", "-trimpath", "-o", out, ".")
	cmd.Dir = pkgDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("lambdalocal: build %s: %w\n%s", pkgDir, err, msg)
	}
	return nil
}

// Options configure an Emulator.
type Options struct {
	// RIE is the path of the aws-lambda-rie binary (required).
	RIE string
	// Bootstrap is the function binary (required).
	Bootstrap string
	// Env is the environment of the emulator and the function, as
	// KEY=value; the process environment is not inherited.
	Env []string
	// Output receives the emulator's and the function's output (its logs
	// and EMF lines). Default: discarded.
	Output io.Writer
}

// Emulator is one running aws-lambda-rie with one function.
type Emulator struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{}
	mu   sync.Mutex // one invoke at a time: the emulator crashes on concurrent ones
}

// Start starts the emulator on free loopback ports and waits until it
// accepts connections. The function itself starts with the first invoke.
func Start(ctx context.Context, o Options) (*Emulator, error) {
	if _, err := os.Stat(o.RIE); err != nil {
		return nil, fmt.Errorf("lambdalocal: emulator: %w (install it with `make tools`)", err)
	}
	invokePort, err := freePort()
	if err != nil {
		return nil, err
	}
	apiPort, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(o.RIE,
		"--runtime-interface-emulator-address", "127.0.0.1:"+invokePort,
		"--runtime-api-address", "127.0.0.1:"+apiPort,
		o.Bootstrap)
	cmd.Env = o.Env
	out := o.Output
	if out == nil {
		out = io.Discard
	}
	cmd.Stdout, cmd.Stderr = out, out
	// A group of its own lets Close end the emulator and the function it
	// started, and nothing else.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("lambdalocal: start emulator: %w", err)
	}
	e := &Emulator{cmd: cmd, url: "http://127.0.0.1:" + invokePort + "/2015-03-31/functions/function/invocations", done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(e.done) }()
	if err := e.waitReady(ctx, "127.0.0.1:"+invokePort); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// waitReady dials until the emulator listens; it announces nothing before
// it does.
func (e *Emulator) waitReady(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, startTimeout)
	defer cancel()
	var d net.Dialer
	for {
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			return conn.Close()
		}
		select {
		case <-e.done:
			return errors.New("lambdalocal: the emulator exited before it listened")
		case <-ctx.Done():
			return fmt.Errorf("lambdalocal: the emulator did not listen on %s: %w", addr, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Response is what one invoke returned.
type Response struct {
	// Payload is the handler's response, or the error document.
	Payload json.RawMessage
	// ErrorType and ErrorMessage are set when the invocation failed (the
	// emulator answers HTTP 200 for function errors too).
	ErrorType, ErrorMessage string
}

// Failed reports a function error.
func (r Response) Failed() bool { return r.ErrorType != "" || r.ErrorMessage != "" }

// Invoke sends one synchronous invoke and returns its response.
func (e *Emulator) Invoke(ctx context.Context, payload []byte) (Response, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(payload))
	if err != nil {
		return Response{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("lambdalocal: invoke: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Response{}, fmt.Errorf("lambdalocal: read invoke response: %w", err)
	}
	r := Response{Payload: body}
	var fnErr struct {
		ErrorType    string `json:"errorType"`
		ErrorMessage string `json:"errorMessage"`
	}
	if json.Unmarshal(body, &fnErr) == nil {
		r.ErrorType, r.ErrorMessage = fnErr.ErrorType, fnErr.ErrorMessage
	}
	if bytes.HasPrefix(body, []byte("Task timed out")) {
		// The emulator's answer for an invocation past its deadline;
		// Lambda reports it as this errorType.
		r.ErrorType, r.ErrorMessage = "Sandbox.Timedout", string(body)
	}
	if resp.StatusCode != http.StatusOK && !r.Failed() {
		r.ErrorType, r.ErrorMessage = "HTTP", fmt.Sprintf("status %d: %s", resp.StatusCode, body)
	}
	return r, nil
}

// Terminate shuts the execution environment down as Lambda does: the
// emulator sends the function SIGTERM (the function registered an
// extension to get it, as aws-lambda-go's WithEnableSIGTERM does) and
// SIGKILLs it 600 ms later (30 % of its 2-second reset timeout; Lambda
// allows 500 ms). Terminate waits for the emulator to exit, at most until
// ctx ends, and returns how long that took.
func (e *Emulator) Terminate(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if err := e.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, fmt.Errorf("lambdalocal: terminate: %w", err)
	}
	select {
	case <-e.done:
		return time.Since(start), nil
	case <-ctx.Done():
		return time.Since(start), fmt.Errorf("lambdalocal: the emulator did not exit after SIGTERM: %w", ctx.Err())
	}
}

// Close ends the emulator and the function process, quietly: it freezes
// the emulator, kills the function (which the emulator starts in a process
// group of its own), then the emulator. A function that outlived its
// emulator would log its lost connections on the way out ("WARNING!
// Reached expected unreachable code!", "connection reset by peer").
func (e *Emulator) Close() {
	select {
	case <-e.done:
		return
	default:
	}
	pid := e.cmd.Process.Pid
	_ = syscall.Kill(-pid, syscall.SIGSTOP)
	for _, fn := range children(pid) {
		_ = syscall.Kill(-fn, syscall.SIGKILL)
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-e.done
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("lambdalocal: find a free port: %w", err)
	}
	defer l.Close()
	_, port, err := net.SplitHostPort(l.Addr().String())
	return port, err
}
