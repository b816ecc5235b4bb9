package outboxlocal

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/truora/minidyn/server"
)

// targetPrefix is the X-Amz-Target prefix of DynamoDB's JSON protocol.
const targetPrefix = "DynamoDB_20120810."

// Error types the compensating layer answers with, spelled as DynamoDB does.
const (
	typeValidation        = "com.amazon.coral.validate#ValidationException"
	typeUnknownOperation  = "com.amazon.coral.service#UnknownOperationException"
	typeSerialization     = "com.amazon.coral.service#SerializationException"
	typeIdempotencyClash  = "com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException"
	typeInternalServer    = "com.amazonaws.dynamodb.v20120810#InternalServerError"
	typeThroughputExceed  = "com.amazonaws.dynamodb.v20120810#ProvisionedThroughputExceededException"
	typeThrottling        = "com.amazon.coral.availability#ThrottlingException"
	messageItemTooLarge   = "Item size has exceeded the maximum allowed size"
	messageDuplicateKeys  = "Provided list of item keys contains duplicates"
	messageTooManyActions = "1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100"
	messageTxnTooLarge    = "Transaction payload size cannot exceed 4MB. Payload Size: %d" // DynamoDB Local 1.25.1's
	messageTokenReused    = "DynamoDB rejected the request because you retried a request with a different payload but with an idempotent token that was already used."
)

// embeddedServer is the http.Handler in front of the minidyn server. It
// compensates the gaps README.md lists, only where the real service's
// behaviour is known, and never by looking at what a particular test sends.
type embeddedServer struct {
	inner http.Handler

	// mu orders requests around compensations that take several server
	// calls (read the old item, write, synthesize the answer): exclusive
	// holders see no other request in between. Plain requests share it.
	// It also keeps table creation, which minidyn does without its own
	// lock, away from every other request.
	mu     sync.RWMutex
	tables map[string]*tableInfo  // guarded by mu
	tokens map[string]tokenRecord // guarded by mu, written only exclusively

	// partitionCount numbers the partitions' tables, so a name is never
	// reused (guarded by mu, written only exclusively).
	partitionCount int

	// commits is the ReadCommitted model; nil without it.
	commits *commits
}

// tableInfo is what the layer remembers of a CreateTable request: the
// server does not report attribute definitions, billing mode or status.
type tableInfo struct {
	hashKey, rangeKey    string
	attributeDefinitions json.RawMessage
	billingMode          string
	createdAt            time.Time
	ttlAttribute         string // empty while TimeToLive is disabled

	// template is the CreateTable request, from which each partition's
	// table is created.
	template map[string]json.RawMessage
	// partitions maps a partition-key value (valueIdentity) to the server
	// table holding its items; nil when the table is kept whole.
	partitions map[string]string
}

// wireResponse is a server answer before the empty-value markers are
// turned back; its body is in the server's form.
type wireResponse struct {
	status int
	body   []byte
}

// wireRequest holds every request field the compensations read. Attribute
// values stay raw JSON so the body sent on is the body received.
type wireRequest struct {
	TableName                           string
	IndexName                           string
	Item                                map[string]json.RawMessage
	Key                                 map[string]json.RawMessage
	ReturnValues                        string
	ReturnValuesOnConditionCheckFailure string
	Select                              string
	KeyConditionExpression              string
	FilterExpression                    string
	UpdateExpression                    string
	ExpressionAttributeNames            map[string]string
	ExpressionAttributeValues           map[string]json.RawMessage
	ExclusiveStartKey                   map[string]json.RawMessage
	GlobalSecondaryIndexes              json.RawMessage
	GlobalSecondaryIndexUpdates         json.RawMessage
	RequestItems                        json.RawMessage // BatchWriteItem's or BatchGetItem's
	TransactItems                       []wireTransactItem
	ClientRequestToken                  string
	KeySchema                           []struct{ AttributeName, KeyType string }
	AttributeDefinitions                json.RawMessage
	BillingMode                         string
	ExclusiveStartTableName             string
	Limit                               *int
	TimeToLiveSpecification             *wireTimeToLive
}

type wireWriteRequest struct {
	PutRequest    *struct{ Item map[string]json.RawMessage }
	DeleteRequest *struct{ Key map[string]json.RawMessage }
}

type wireTransactItem struct {
	Put, Update, Delete, ConditionCheck *wireAction
	Get                                 *wireAction // TransactGetItems'
}

// wireAction is one action of a transaction.
type wireAction struct {
	TableName                           string
	Item, Key                           map[string]json.RawMessage
	UpdateExpression                    string
	ConditionExpression                 string
	ExpressionAttributeNames            map[string]string
	ExpressionAttributeValues           map[string]json.RawMessage
	ReturnValuesOnConditionCheckFailure string
}

// writeRequests decodes a BatchWriteItem's RequestItems; nil for any other
// request.
func (r *wireRequest) writeRequests() map[string][]wireWriteRequest {
	var out map[string][]wireWriteRequest
	_ = json.Unmarshal(r.RequestItems, &out)
	return out
}

// action returns whichever action the item carries.
func (t wireTransactItem) action() *wireAction {
	for _, a := range []*wireAction{t.Put, t.Update, t.Delete, t.ConditionCheck, t.Get} {
		if a != nil {
			return a
		}
	}
	return nil
}

func newEmbeddedServer(c *commits) *embeddedServer {
	return &embeddedServer{
		inner:   server.NewServer(),
		tables:  map[string]*tableInfo{},
		tokens:  map[string]tokenRecord{},
		commits: c,
	}
}

// ServeHTTP implements http.Handler.
func (s *embeddedServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), targetPrefix)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.write(w, apiError(http.StatusBadRequest, typeSerialization, "read request body: "+err.Error()))
		return
	}
	if hasNullValue(body) {
		s.write(w, apiError(http.StatusBadRequest, typeValidation, messageEmptyValue))
		return
	}
	var req wireRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.write(w, apiError(http.StatusBadRequest, typeSerialization, err.Error()))
		return
	}
	s.write(w, s.handle(r.Context(), op, body, &req))
}

func (s *embeddedServer) handle(ctx context.Context, op string, body []byte, req *wireRequest) wireResponse {
	s.ensurePartitions(ctx, op, req)
	switch op {
	case "ListTables":
		return s.listTables(req)
	case "CreateTable", "DeleteTable", "UpdateTable", "DescribeTable":
		return s.tableOperation(ctx, op, body, req)
	case "PutItem":
		return s.putItem(ctx, body, req)
	case "DeleteItem", "UpdateItem":
		return s.writeItem(ctx, op, body, req)
	case "BatchWriteItem":
		return s.batchWriteItem(ctx, body, req)
	case "TransactWriteItems":
		return s.transactWriteItems(ctx, body, req)
	case "Query", "Scan":
		return s.read(ctx, op, body, req)
	case "UpdateTimeToLive", "DescribeTimeToLive":
		return s.timeToLive(op, req)
	case "GetItem", "BatchGetItem", "TransactGetItems":
		s.mu.RLock()
		defer s.mu.RUnlock()
		if resp, refused := s.conflict(op, req); refused {
			return resp
		}
		return s.call(ctx, op, body)
	default:
		// The server answers unknown operations in plain text, which the
		// SDK cannot decode; DynamoDB answers in JSON.
		return apiError(http.StatusBadRequest, typeUnknownOperation, "operation "+op+" is not supported by the embedded server")
	}
}

// send sends one request to the server as it is (no routing) with empty
// values replaced by their markers.
func (s *embeddedServer) send(ctx context.Context, op string, body []byte) wireResponse {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/", bytes.NewReader(encodeEmptyValues(body)))
	if err != nil {
		return apiError(http.StatusInternalServerError, typeInternalServer, err.Error())
	}
	req.Header.Set("X-Amz-Target", targetPrefix+op)
	rec := httptest.NewRecorder()
	s.inner.ServeHTTP(rec, req)
	out := wireResponse{status: rec.Code, body: rec.Body.Bytes()}
	if out.status >= http.StatusBadRequest && !json.Valid(out.body) {
		return apiError(out.status, typeValidation, strings.TrimSpace(string(out.body)))
	}
	return out
}

// getItem reads the current item under key with a consistent read; nil
// when there is none. The item is in the server's form.
func (s *embeddedServer) getItem(ctx context.Context, table string, key map[string]json.RawMessage) json.RawMessage {
	body, err := json.Marshal(map[string]any{"TableName": table, "Key": key, "ConsistentRead": true})
	if err != nil {
		return nil
	}
	resp := s.call(ctx, "GetItem", body)
	if resp.status != http.StatusOK {
		return nil
	}
	var out struct{ Item json.RawMessage }
	if json.Unmarshal(resp.body, &out) != nil || len(out.Item) == 0 || string(out.Item) == "null" {
		return nil
	}
	return out.Item
}

// keyOf projects item onto its table's key attributes. The caller holds mu.
func (s *embeddedServer) keyOf(table string, item map[string]json.RawMessage) (map[string]json.RawMessage, bool) {
	info := s.tables[table]
	if info == nil {
		return nil, false
	}
	key := map[string]json.RawMessage{}
	for _, name := range []string{info.hashKey, info.rangeKey} {
		if name == "" {
			continue
		}
		v, ok := item[name]
		if !ok {
			return nil, false
		}
		key[name] = v
	}
	return key, true
}

// write sends resp to the client with the markers turned back into empty
// values and a correct CRC32 header, so clients validate the checksum of the
// body they actually receive.
func (s *embeddedServer) write(w http.ResponseWriter, resp wireResponse) {
	body := decodeEmptyValues(resp.body)
	h := w.Header()
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
	h.Set("X-Amzn-Requestid", newRequestID())
	w.WriteHeader(resp.status)
	_, _ = w.Write(body)
}

// apiError is a DynamoDB JSON error response.
func apiError(status int, errorType, message string) wireResponse {
	body, _ := json.Marshal(map[string]string{"__type": errorType, "message": message})
	return wireResponse{status: status, body: body}
}

// errorType returns the short error type of an error response ("" for
// success): the part after '#', as the SDK reads it.
func errorType(resp wireResponse) string {
	if resp.status < http.StatusBadRequest {
		return ""
	}
	var e struct {
		Type string `json:"__type"`
	}
	_ = json.Unmarshal(resp.body, &e)
	return e.Type[strings.LastIndex(e.Type, "#")+1:]
}

func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return strings.ToUpper(hex.EncodeToString(b[:]))
}

// sortedKeys returns the keys of m in ascending order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
