package outboxlocal

import (
	"encoding/json"
	"net/http"
)

const (
	typeResourceNotFound = "com.amazonaws.dynamodb.v20120810#ResourceNotFoundException"
	messageNoTable       = "Cannot do operations on a non-existent table"
)

// wireTimeToLive is UpdateTimeToLive's TimeToLiveSpecification.
type wireTimeToLive struct {
	AttributeName string
	Enabled       bool
}

// timeToLive answers UpdateTimeToLive and DescribeTimeToLive, which the
// server lacks, as DynamoDB Local 1.25.1 does, so code that sets a table up
// runs here as there: the setting is kept with the table, a change
// to the state already set or to another attribute while one is enabled is
// a ValidationException, and nothing ever expires: DynamoDB deletes expired
// items within days, and reads return them until then. DynamoDB also
// refuses any second change within an hour of the first; neither server
// models that window.
func (s *embeddedServer) timeToLive(op string, req *wireRequest) wireResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	info := s.tables[req.TableName]
	if info == nil {
		return apiError(http.StatusBadRequest, typeResourceNotFound, messageNoTable)
	}
	var out any
	if op == "DescribeTimeToLive" {
		desc := map[string]string{"TimeToLiveStatus": "DISABLED"}
		if info.ttlAttribute != "" {
			desc["TimeToLiveStatus"], desc["AttributeName"] = "ENABLED", info.ttlAttribute
		}
		out = map[string]any{"TimeToLiveDescription": desc}
	} else {
		spec := req.TimeToLiveSpecification
		switch {
		case spec == nil:
			return apiError(http.StatusBadRequest, typeValidation, "1 validation error detected: Value null at 'timeToLiveSpecification' failed to satisfy constraint: Member must not be null")
		case spec.AttributeName == "" || len(spec.AttributeName) > 255:
			return apiError(http.StatusBadRequest, typeValidation, "Names of key attributes and attributes projected into an index must be between 1 and 255 characters, inclusive")
		case info.ttlAttribute != "" && info.ttlAttribute != spec.AttributeName:
			return apiError(http.StatusBadRequest, typeValidation, "TimeToLive is active on a different AttributeName")
		case spec.Enabled && info.ttlAttribute != "":
			return apiError(http.StatusBadRequest, typeValidation, "TimeToLive is already enabled")
		case !spec.Enabled && info.ttlAttribute == "":
			return apiError(http.StatusBadRequest, typeValidation, "TimeToLive is already disabled")
		}
		info.ttlAttribute = ""
		if spec.Enabled {
			info.ttlAttribute = spec.AttributeName
		}
		out = map[string]any{"TimeToLiveSpecification": spec}
	}
	body, _ := json.Marshal(out)
	return wireResponse{status: http.StatusOK, body: body}
}
