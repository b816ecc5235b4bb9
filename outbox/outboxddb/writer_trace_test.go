package outboxddb

import (
	"bytes"
	"context"
	"testing"
	"testing/synctest"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/spillway-dev/spillway/outbox"
)

const (
	traceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	amznCtx     = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
	amznEnv     = "Root=1-67891233-abcdef012345678912345678;Parent=463ac35c9f6413ad;Sampled=0"
	amznLambda  = "Root=1-6a1b2c3d-0123456789abcdef01234567;Parent=1111111111111111;Sampled=1"
)

func noEnv(string) string { return "" }

func lambdaEnv(name string) string {
	if name == "_X_AMZN_TRACE_ID" {
		return amznEnv
	}
	return ""
}

// storedHeaders fetches bucket's messages and returns each one's headers
// (nil for a message stored without a header blob).
func storedHeaders(t *testing.T, e *env, bucket int) [][]outbox.Header {
	t.Helper()
	msgs, err := e.store(t).FetchBatch(t.Context(), bucket, 100)
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]outbox.Header, len(msgs))
	for i, m := range msgs {
		if m.Headers == nil {
			continue
		}
		if out[i], err = outbox.DecodeHeaders(m.Headers); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func headerValue(hs []outbox.Header, key string) (string, bool) {
	for _, h := range hs {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

func TestWriterTrace(t *testing.T) {
	t.Run("Enqueue_StoresTheCallersTraceContext", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w := e.writer(t, func(o *WriterOptions) { o.Getenv = lambdaEnv })
			ctx := outbox.WithTraceContext(t.Context(), outbox.TraceContext{TraceParent: traceParent, TraceState: "vendor=1", AmznTraceID: amznCtx})
			if _, err := w.Enqueue(ctx, newMessage(t, "t", "k", 2)); err != nil {
				t.Fatal(err)
			}
			hs := storedHeaders(t, e, 2)[0]
			for key, want := range map[string]string{outbox.HeaderTraceParent: traceParent, outbox.HeaderTraceState: "vendor=1", outbox.HeaderAmznTraceID: amznCtx} {
				if got, _ := headerValue(hs, key); got != want {
					t.Errorf("header %s = %q, want %q (the context's, not the environment's)", key, got, want)
				}
			}
		})
	})

	t.Run("EnqueueBatch_KeepsAMessagesOwnTraceHeaders", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w := e.writer(t, func(o *WriterOptions) { o.Getenv = noEnv })
			own := "00-11111111111111111111111111111111-2222222222222222-01"
			withOwn := newMessage(t, "t", "a", 3)
			withOwn.Headers = outbox.EncodeHeaders([]outbox.Header{{Key: "app", Value: []byte("x")}, {Key: "Traceparent", Value: []byte(own)}})
			plain := newMessage(t, "t", "b", 3)
			ctx := outbox.WithTraceContext(t.Context(), outbox.TraceContext{TraceParent: traceParent, TraceState: "vendor=1", AmznTraceID: amznCtx})
			if _, err := w.EnqueueBatch(ctx, []outbox.Message{withOwn, plain}); err != nil {
				t.Fatal(err)
			}
			hs := storedHeaders(t, e, 3)
			if got, _ := headerValue(hs[0], "Traceparent"); got != own {
				t.Errorf("own traceparent %q, want %q", got, own)
			}
			if _, dup := headerValue(hs[0], outbox.HeaderTraceParent); dup {
				t.Errorf("a second traceparent was added to a message that had one: %v", hs[0])
			}
			if _, ok := headerValue(hs[0], outbox.HeaderTraceState); ok {
				t.Errorf("the context's tracestate was added next to another trace's traceparent")
			}
			if got, _ := headerValue(hs[0], outbox.HeaderAmznTraceID); got != amznCtx || hs[0][0].Key != "app" {
				t.Errorf("headers %v, want the message's own first and the context's X-Ray header added", hs[0])
			}
			if got, _ := headerValue(hs[1], outbox.HeaderTraceParent); got != traceParent {
				t.Errorf("plain message traceparent %q, want the context's", got)
			}
			// The caller's messages are not modified.
			if !bytes.Equal(plain.Headers, nil) || len(withOwn.Headers) == 0 {
				t.Errorf("the writer modified the caller's messages")
			}
		})
	})

	t.Run("TransactItems_CarryTheTraceContext", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w := e.writer(t, func(o *WriterOptions) { o.Getenv = noEnv })
			ctx := outbox.WithTraceContext(t.Context(), outbox.TraceContext{AmznTraceID: amznCtx})
			item, one, err := prepareItem(ctx, w, newMessage(t, "t", "a", 1))
			if err != nil {
				t.Fatal(err)
			}
			items, many, err := prepareItems(ctx, w, []outbox.Message{newMessage(t, "t", "b", 1), newMessage(t, "t", "c", 4)})
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range []struct {
				item types.TransactWriteItem
				msg  outbox.Message
			}{{item, one}, {items[0], many[0]}, {items[1], many[1]}} {
				blob, ok := c.item.Put.Item[attrHeaders].(*types.AttributeValueMemberB)
				if !ok || !bytes.Equal(blob.Value, c.msg.Headers) {
					t.Fatalf("item %d: headers attribute %v does not match the returned message", i, c.item.Put.Item[attrHeaders])
				}
				hs, err := outbox.DecodeHeaders(c.msg.Headers)
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := headerValue(hs, outbox.HeaderAmznTraceID); got != amznCtx {
					t.Errorf("item %d: X-Amzn-Trace-Id %q, want %q", i, got, amznCtx)
				}
			}
		})
	})

	// Inside Lambda the function's own X-Ray trace stands in when the context
	// carries none: aws-lambda-go's context value first, then the runtime's
	// environment variable.
	t.Run("InLambda_FallsBackToTheInvocationsTrace", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w := e.writer(t, func(o *WriterOptions) { o.Getenv = lambdaEnv })
			//lint:ignore SA1029 the key is aws-lambda-go's, a plain string
			invocation := context.WithValue(t.Context(), "x-amzn-trace-id", amznLambda)
			if _, err := w.Enqueue(invocation, newMessage(t, "t", "a", 5)); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Enqueue(t.Context(), newMessage(t, "t", "b", 5)); err != nil {
				t.Fatal(err)
			}
			// A context with only a W3C trace still gets the invocation's X-Ray id.
			w3c := outbox.WithTraceContext(t.Context(), outbox.TraceContext{TraceParent: traceParent})
			if _, err := w.Enqueue(w3c, newMessage(t, "t", "c", 5)); err != nil {
				t.Fatal(err)
			}
			hs := storedHeaders(t, e, 5)
			for i, want := range []string{amznLambda, amznEnv, amznEnv} {
				if got, _ := headerValue(hs[i], outbox.HeaderAmznTraceID); got != want {
					t.Errorf("message %d: X-Amzn-Trace-Id %q, want %q", i, got, want)
				}
			}
			if got, _ := headerValue(hs[2], outbox.HeaderTraceParent); got != traceParent {
				t.Errorf("message 2 lost its context's traceparent: %v", hs[2])
			}
		})
	})

	t.Run("WithoutTraceContext_AddsNoHeaders", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			e := newEnv(t)
			w := e.writer(t, func(o *WriterOptions) { o.Getenv = noEnv })
			withBlob := newMessage(t, "t", "a", 6)
			withBlob.Headers = outbox.EncodeHeaders([]outbox.Header{{Key: "app", Value: []byte("x")}})
			// A malformed value in the context is no usable trace either.
			ctx := outbox.WithTraceContext(t.Context(), outbox.TraceContext{TraceParent: "not-a-trace", AmznTraceID: "junk"})
			if _, err := w.EnqueueBatch(ctx, []outbox.Message{newMessage(t, "t", "plain", 6), withBlob}); err != nil {
				t.Fatal(err)
			}
			msgs, err := e.store(t).FetchBatch(t.Context(), 6, 10)
			if err != nil {
				t.Fatal(err)
			}
			if msgs[0].Headers != nil {
				t.Errorf("a message without headers gained a blob %x", msgs[0].Headers)
			}
			if !bytes.Equal(msgs[1].Headers, withBlob.Headers) {
				t.Errorf("headers changed from %x to %x", withBlob.Headers, msgs[1].Headers)
			}
		})
	})
}
