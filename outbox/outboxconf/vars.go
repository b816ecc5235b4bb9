package outboxconf

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spillway-dev/spillway/outbox"
)

// VariableError names the environment variable that makes the configuration
// unusable, its value and what is wrong. It matches outbox.ErrMisconfigured.
type VariableError struct {
	// Variable is the environment variable, e.g. "SPILLWAY_BATCH_SIZE".
	Variable string
	// Value is the variable's value as read.
	Value string
	// Problem says what is wrong and what is expected.
	Problem string
}

// Error implements error.
func (e *VariableError) Error() string {
	return fmt.Sprintf("configuration: %s=%q: %s", e.Variable, e.Value, e.Problem)
}

// Is reports whether target is outbox.ErrMisconfigured.
func (e *VariableError) Is(target error) bool { return target == outbox.ErrMisconfigured }

// Env reads variables and keeps the first error; reads after an error
// return values the caller must not use. Each reader takes the variable
// and the default it returns when the variable is unset.
type Env struct {
	getenv func(string) string
	err    error
}

// NewEnv returns a reader of the variables getenv (os.Getenv) returns.
func NewEnv(getenv func(string) string) *Env { return &Env{getenv: getenv} }

// Err returns the first unusable variable as a *VariableError, nil when
// every variable read so far is usable.
func (p *Env) Err() error { return p.err }

func (p *Env) fail(name, value, format string, args ...any) {
	if p.err == nil {
		p.err = &VariableError{Variable: name, Value: value, Problem: fmt.Sprintf(format, args...)}
	}
}

// get returns the value and whether it is set; a value of only spaces is
// set (and then rejected by the caller) so a typo is never read as unset.
func (p *Env) get(name string) (string, bool) {
	v := p.getenv(name)
	return v, v != ""
}

// Required reads a variable that must be set, without surrounding spaces.
func (p *Env) Required(name string) string {
	v, ok := p.get(name)
	switch {
	case !ok:
		p.fail(name, v, "required, not set")
	case strings.TrimSpace(v) != v || v == "":
		p.fail(name, v, "has leading or trailing spaces")
	}
	return v
}

// Name reads a name-like value: non-blank, no surrounding spaces.
func (p *Env) Name(name, def string) string {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	if strings.TrimSpace(v) != v || strings.TrimSpace(v) == "" {
		p.fail(name, v, "must not be blank or have leading or trailing spaces")
	}
	return v
}

// Int reads a decimal integer in [lo, hi]; def when unset.
func (p *Env) Int(name string, def, lo, hi int) int {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		p.fail(name, v, "not a decimal integer")
		return def
	}
	if n < lo || n > hi {
		p.fail(name, v, "must be between %d and %d", lo, hi)
	}
	return n
}

// Duration reads a positive Go duration; def when unset.
func (p *Env) Duration(name string, def time.Duration) time.Duration {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		p.fail(name, v, "not a Go duration (write e.g. 500ms, 1s or 2m30s)")
		return def
	}
	if d <= 0 {
		p.fail(name, v, "must be positive")
	}
	return d
}

// Bool reads true or false (strconv.ParseBool); def when unset.
func (p *Env) Bool(name string, def bool) bool {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail(name, v, "not a boolean (true or false)")
		return def
	}
	return b
}

// OneOf reads one of the allowed values; def when unset.
func (p *Env) OneOf(name, def string, allowed ...string) string {
	v, ok := p.get(name)
	if !ok {
		return def
	}
	for _, a := range allowed {
		if v == a {
			return v
		}
	}
	p.fail(name, v, "must be one of %s", strings.Join(allowed, ", "))
	return def
}

// Endpoint reads an http:// or https:// URL with a host; empty when unset.
func (p *Env) Endpoint(name string) string {
	v, ok := p.get(name)
	if !ok {
		return ""
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		p.fail(name, v, "not an http:// or https:// URL with a host")
	}
	return v
}

// LocalEndpoint reports whether endpoint is a URL on this machine
// (localhost or a loopback address): DynamoDB Local, LocalStack, the
// embedded server. Such an endpoint accepts any credentials, and no
// relay schedule runs beside it.
func LocalEndpoint(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return false
	}
	if u.Hostname() == "localhost" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return ip != nil && ip.IsLoopback()
}

// list splits a comma-separated value, rejecting empty elements.
func (p *Env) list(name string) ([]string, string, bool) {
	v, ok := p.get(name)
	if !ok {
		return nil, v, true
	}
	var out []string
	for part := range strings.SplitSeq(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			p.fail(name, v, "has an empty element; separate values with single commas")
			return nil, v, false
		}
		out = append(out, part)
	}
	return out, v, true
}

// Brokers reads comma-separated host:port pairs; nil when unset.
func (p *Env) Brokers(name string) []string {
	brokers, v, ok := p.list(name)
	if !ok {
		return nil
	}
	for _, b := range brokers {
		host, port, err := net.SplitHostPort(b)
		n, perr := strconv.Atoi(port)
		if err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			p.fail(name, v, "broker %q is not host:port", b)
			return nil
		}
	}
	return brokers
}

// Topics reads comma-separated Kafka topic names; nil when unset.
func (p *Env) Topics(name string) []string {
	topics, v, ok := p.list(name)
	if !ok {
		return nil
	}
	for _, t := range topics {
		if problem := TopicProblem(t); problem != "" {
			p.fail(name, v, "topic %q: %s", t, problem)
			return nil
		}
	}
	return topics
}

// Topic reads one Kafka topic name; empty when unset.
func (p *Env) Topic(name string) string {
	v, ok := p.get(name)
	if !ok {
		return ""
	}
	if problem := TopicProblem(v); problem != "" {
		p.fail(name, v, "topic %q: %s", v, problem)
	}
	return v
}

// ARN reads an ARN of the given service.
func (p *Env) ARN(name, service string) string {
	v, ok := p.get(name)
	if !ok {
		return ""
	}
	parts := strings.SplitN(v, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != service || parts[5] == "" {
		p.fail(name, v, "not an ARN of %s (arn:aws:%s:<region>:<account>:…)", service, service)
	}
	return v
}

// Function reads a Lambda function name, name:qualifier, partial or full
// ARN: what lambda:Invoke accepts as FunctionName.
func (p *Env) Function(name string) string {
	v, ok := p.get(name)
	if !ok {
		return ""
	}
	const maxLen = 170 // Invoke's FunctionName limit, ARN and qualifier included
	if len(v) > maxLen {
		p.fail(name, v, "longer than %d characters", maxLen)
		return v
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_:$.", c) >= 0) {
			p.fail(name, v, "not a Lambda function name or ARN (character %q at %d)", c, i)
			return v
		}
	}
	return v
}

// TopicProblem says why t is not a valid Kafka topic name; empty when it is.
// A message for an invalid topic can never be published and would block its
// bucket, so it is refused at enqueue.
func TopicProblem(t string) string {
	const maxTopic = 249
	switch {
	case t == "":
		return "is empty"
	case len(t) > maxTopic:
		return fmt.Sprintf("is %d characters, Kafka allows at most %d", len(t), maxTopic)
	case t == "." || t == "..":
		return "is not a legal Kafka topic name"
	}
	for i, c := range t {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			what := strconv.QuoteRune(c)
			if c == utf8.RuneError && !strings.HasPrefix(t[i:], string(utf8.RuneError)) {
				what = fmt.Sprintf("byte 0x%02x", t[i])
			}
			return fmt.Sprintf("%s at byte %d is not allowed (Kafka topics use ASCII letters, digits, '.', '_' and '-')", what, i)
		}
	}
	return ""
}
