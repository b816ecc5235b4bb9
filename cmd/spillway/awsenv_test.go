package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// noCredentials leaves the SDK's credential chain nothing to find: no
// variables, no shared files, and an instance-metadata endpoint that
// refuses connections, as on a laptop without AWS set up. It also clears
// the endpoint `make test-ddblocal` exports, so the regional endpoint is
// the one the commands resolve.
func noCredentials(t *testing.T) {
	dir := t.TempDir()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_PROFILE": "", "AWS_DEFAULT_PROFILE": "",
		"AWS_REGION": "eu-west-1", "AWS_DEFAULT_REGION": "",
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_CONTAINER_CREDENTIALS_FULL_URI": "", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "", "AWS_WEB_IDENTITY_TOKEN_FILE": "",
		"AWS_EC2_METADATA_SERVICE_ENDPOINT": "http://127.0.0.1:1", "AWS_EC2_METADATA_DISABLED": "",
		"SPILLWAY_DYNAMODB_ENDPOINT": "",
	} {
		t.Setenv(k, v)
	}
}

func TestAWSEnv(t *testing.T) {
	// Without credentials a command says what to set, in the flags' words,
	// and keeps the SDK's reason (no EC2 IMDS role found) at the end. No
	// request leaves: the SDK signs before it sends.
	t.Run("MissingCredentialsSayWhatToSet", func(t *testing.T) {
		noCredentials(t)
		code, out, errs := cli(t, "status", "--table", "orders-outbox", "--dynamodb-endpoint", "http://dynamodb.invalid")
		want := "spillway status: no AWS credentials for http://dynamodb.invalid: give --profile NAME or set AWS_PROFILE (after aws sso login for an SSO profile), " +
			"or set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run with an IAM role (the SDK: failed to refresh cached credentials, no EC2 IMDS role found"
		if code != 1 || out != "" || !strings.HasPrefix(errs, want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("exit %d, stdout %q, stderr %q; want 1 and %q…", code, out, errs, want)
		}
	})

	// --region and --profile override AWS_REGION and AWS_PROFILE, for every
	// client the command makes.
	t.Run("RegionAndProfileFlagsOverrideTheEnvironment", func(t *testing.T) {
		noCredentials(t)
		_, _, errs := cli(t, "status", "--table", "orders-outbox", "--region", "ap-south-1")
		if !strings.Contains(errs, "no AWS credentials for the regional endpoint of ap-south-1:") {
			t.Errorf("--region ap-south-1 over AWS_REGION=eu-west-1: %q", errs)
		}
		code, _, errs := cli(t, "status", "--table", "orders-outbox", "--profile", "no-such-profile")
		if code != 1 || !strings.Contains(errs, "no-such-profile") {
			t.Errorf("--profile no-such-profile: exit %d, %q; want 1 and the profile", code, errs)
		}
	})

	// Without a region and an endpoint, the command says so before it
	// sends anything.
	t.Run("MissingRegionNamesTheFlag", func(t *testing.T) {
		noCredentials(t)
		t.Setenv("AWS_REGION", "")
		code, _, errs := cli(t, "parked", "list", "--table", "orders-outbox")
		if want := "spillway parked: no AWS region: give --region (or set AWS_REGION, or use a profile that names one)\n"; code != 2 || errs != want {
			t.Errorf("exit %d, %q; want 2 and %q", code, errs, want)
		}
	})
}
