package outboxlambda

import (
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
)

// invocation is one call a fakeInvoker received.
type invocation struct {
	function string
	kind     types.InvocationType
	payload  string
}

// fakeInvoker records the wake-ups the functions send and accepts them.
type fakeInvoker struct {
	mu    sync.Mutex
	calls []invocation
}

func (f *fakeInvoker) Invoke(_ context.Context, in *lambda.InvokeInput, _ ...func(*lambda.Options)) (*lambda.InvokeOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, invocation{function: aws.ToString(in.FunctionName), kind: in.InvocationType, payload: string(in.Payload)})
	return &lambda.InvokeOutput{StatusCode: 202}, nil
}

func (f *fakeInvoker) invocations() []invocation {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]invocation(nil), f.calls...)
}
