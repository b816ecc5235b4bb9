package outboxddb

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/spillway-dev/spillway/outbox/lease"
)

// fakeDB is a Client that records every request and answers with the
// handler a test installs (an empty success without one). It exists for
// request-shape tests and for error paths the embedded server cannot
// produce on demand.
type fakeDB struct {
	mu    sync.Mutex
	calls []fakeCall

	query    func(*dynamodb.QueryInput) (*dynamodb.QueryOutput, error)
	put      func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error)
	update   func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)
	delete   func(*dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error)
	batch    func(*dynamodb.BatchWriteItemInput) (*dynamodb.BatchWriteItemOutput, error)
	transact func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error)
	snapshot func(*dynamodb.TransactGetItemsInput) (*dynamodb.TransactGetItemsOutput, error)
	create   func(*dynamodb.CreateTableInput) (*dynamodb.CreateTableOutput, error)
	describe func(*dynamodb.DescribeTableInput) (*dynamodb.DescribeTableOutput, error)
}

// fakeCall is one request: its operation, the input, and the input rendered
// when it was sent (callers may reuse an input object for the next page).
type fakeCall struct {
	op    string
	in    any
	shape string
}

var _ Client = (*fakeDB)(nil)

func (f *fakeDB) record(op string, in any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fakeCall{op: op, in: in, shape: canon(in)})
}

// ops returns the operations in request order.
func (f *fakeDB) ops() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		out = append(out, c.op)
	}
	return out
}

// shapes returns the rendered inputs of op, in request order.
func (f *fakeDB) shapes(op string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if c.op == op {
			out = append(out, c.shape)
		}
	}
	return out
}

func (f *fakeDB) count(op string) int { return len(f.shapes(op)) }

func (f *fakeDB) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = nil
}

func answer[In, Out any](f *fakeDB, op string, in *In, h func(*In) (*Out, error)) (*Out, error) {
	f.record(op, in)
	if h == nil {
		return new(Out), nil
	}
	return h(in)
}

func (f *fakeDB) Query(_ context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return answer(f, "Query", in, f.query)
}

func (f *fakeDB) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return answer(f, "PutItem", in, f.put)
}

func (f *fakeDB) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return answer(f, "UpdateItem", in, f.update)
}

func (f *fakeDB) DeleteItem(_ context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return answer(f, "DeleteItem", in, f.delete)
}

func (f *fakeDB) BatchWriteItem(_ context.Context, in *dynamodb.BatchWriteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	return answer(f, "BatchWriteItem", in, f.batch)
}

func (f *fakeDB) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return answer(f, "TransactWriteItems", in, f.transact)
}

func (f *fakeDB) TransactGetItems(_ context.Context, in *dynamodb.TransactGetItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	return answer(f, "TransactGetItems", in, f.snapshot)
}

func (f *fakeDB) CreateTable(_ context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return answer(f, "CreateTable", in, f.create)
}

func (f *fakeDB) DescribeTable(_ context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return answer(f, "DescribeTable", in, f.describe)
}

// canon renders a request deterministically: pointers followed, nil and
// zero fields left out, map keys sorted, attribute values tagged with their
// DynamoDB type. Two requests with the same canon are the same request.
func canon(v any) string {
	var b strings.Builder
	canonValue(&b, reflect.ValueOf(v))
	return b.String()
}

func canonValue(b *strings.Builder, v reflect.Value) {
	switch v.Kind() {
	case reflect.Invalid:
		b.WriteString("nil")
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		if name := v.Elem().Type().Name(); v.Kind() == reflect.Interface && strings.HasPrefix(name, "AttributeValueMember") {
			b.WriteString(strings.TrimPrefix(name, "AttributeValueMember"))
			canonValue(b, v.Elem().Elem().FieldByName("Value"))
			return
		}
		canonValue(b, v.Elem())
	case reflect.Struct:
		b.WriteString("{")
		first := true
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() || v.Field(i).IsZero() {
				continue
			}
			if !first {
				b.WriteString(" ")
			}
			first = false
			b.WriteString(f.Name + ":")
			canonValue(b, v.Field(i))
		}
		b.WriteString("}")
	case reflect.Map:
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, c reflect.Value) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(c)) })
		b.WriteString("map[")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(" ")
			}
			fmt.Fprintf(b, "%v=", k)
			canonValue(b, v.MapIndex(k))
		}
		b.WriteString("]")
	case reflect.Slice:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			fmt.Fprintf(b, "%q", v.Bytes())
			return
		}
		b.WriteString("[")
		for i := range v.Len() {
			if i > 0 {
				b.WriteString(" ")
			}
			canonValue(b, v.Index(i))
		}
		b.WriteString("]")
	case reflect.String:
		fmt.Fprintf(b, "%q", v.String())
	default:
		fmt.Fprint(b, v.Interface())
	}
}

// relayRun drives a store's acquisition rounds the way one relay run does:
// it carries the round count and the standby state from each round to the
// next.
type relayRun struct {
	mu sync.Mutex
	s  *Store
	st lease.RoundState
}

func (r *relayRun) acquire(ctx context.Context, req lease.Request) (lease.Acquisition, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	acq, err := r.s.acquire(ctx, req, r.st)
	// Carried like the relay engine carries them: the fleet's rounds read
	// only heartbeats while the fleet stays settled.
	r.st.Standby, r.st.Settled = acq.Standby, acq.Settled
	if err == nil && !acq.Rested {
		r.st.Round++
	}
	return acq, err
}
