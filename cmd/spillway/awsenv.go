package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spillway-dev/spillway/outbox/outboxddb"
)

// The AWS SDK's variables that --region and --profile override.
const (
	envRegion  = "AWS_REGION"
	envProfile = "AWS_PROFILE"
)

// explainSetup says a missing table or missing credentials in the flags'
// words; it returns "" for any other error.
func explainSetup(err error) string {
	if tnf := (*outboxddb.TableNotFoundError)(nil); errors.As(err, &tnf) {
		return fmt.Sprintf("table %s not found at %s; check --table (or SPILLWAY_TABLE) and --dynamodb-endpoint, or run `spillway create-table`",
			strings.Join(tnf.Tables, " or "), tnf.Endpoint)
	}
	if ce := (*outboxddb.CredentialsError)(nil); errors.As(err, &ce) {
		return fmt.Sprintf("no AWS credentials for %s: give --profile NAME or set AWS_PROFILE (after aws sso login for an SSO profile), "+
			"or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run with an IAM role (the SDK: %v)", ce.Endpoint, ce.Err)
	}
	return ""
}
